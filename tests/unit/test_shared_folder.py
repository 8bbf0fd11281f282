"""Which members of the owners' group do not share this instance's `fs` folder."""

from __future__ import annotations

from adapter.cluster.shared_folder import refusal, strangers


def test_members_with_a_marker_in_our_folder_share_it() -> None:
    marked = ["a.w0", "a.w1", "gone"]
    assert strangers(["a.w0", "a.w1"], marked, "a.w0") == []
    assert strangers(["a.w0"], [], "a.w0") == []  # alone, before our own marker is seen


def test_members_without_one_are_named() -> None:
    assert strangers(["me", "b", "c"], ["me", "c"], "me") == ["b"]
    message = refusal(["b"])
    assert "b" in message
    assert "cold_dir_shared" in message
