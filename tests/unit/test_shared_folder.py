"""Which members of the owners' group do not share this instance's `fs` folder."""

from __future__ import annotations

from adapter.cluster.shared_folder import MARKERS, refusal, strangers


def test_members_with_a_marker_in_our_folder_share_it() -> None:
    marked = [f"{MARKERS}a.w0", f"{MARKERS}a.w1", f"{MARKERS}gone"]
    assert strangers(["a.w0", "a.w1"], marked, "a.w0") == []
    assert strangers(["a.w0"], [], "a.w0") == []  # alone, before our own marker is seen


def test_members_without_one_are_named() -> None:
    assert strangers(["me", "b", "c"], [f"{MARKERS}me", f"{MARKERS}c"], "me") == ["b"]
    message = refusal(["b"])
    assert "b" in message
    assert "cold_dir_shared" in message
