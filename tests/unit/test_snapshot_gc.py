"""The collector's decision: only blobs seen unreferenced for a whole grace period go."""

from __future__ import annotations

from adapter.service.snapshot_gc import due

GRACE = 100


def test_a_referenced_blob_is_kept_and_forgotten() -> None:
    doomed, seen = due(["a"], {"a"}, {"a": 0}, 1_000, GRACE)
    assert (doomed, seen) == ([], {})


def test_an_unreferenced_blob_goes_only_after_the_grace_period() -> None:
    doomed, seen = due(["a"], set(), {}, 1_000, GRACE)
    assert (doomed, seen) == ([], {"a": 1_000})
    doomed, seen = due(["a"], set(), seen, 1_099, GRACE)
    assert (doomed, seen) == ([], {"a": 1_000})
    doomed, seen = due(["a"], set(), seen, 1_100, GRACE)
    assert (doomed, seen) == (["a"], {})


def test_a_blob_referenced_again_starts_over() -> None:
    _, seen = due(["a"], set(), {}, 0, GRACE)
    _, seen = due(["a"], {"a"}, seen, 50, GRACE)  # its pointer showed up (a slow replay)
    doomed, seen = due(["a"], set(), seen, 120, GRACE)
    assert (doomed, seen) == ([], {"a": 120})


def test_blobs_gone_from_the_store_are_forgotten() -> None:
    _, seen = due(["a", "b"], set(), {}, 0, GRACE)
    assert due(["b"], set(), seen, 10, GRACE) == ([], {"b": 0})
