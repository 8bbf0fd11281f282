"""The collector's decision: only blobs seen unreferenced for a whole grace period go."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.objects.base import ObjectStoreError
from adapter.objects.local import LocalObjectStore
from adapter.service.snapshot_gc import OrphanSweep, collect_forever, due
from topology.errors import BrokerUnavailable

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


async def test_a_sweep_lists_before_catching_up_and_deletes_only_what_is_due(
    tmp_path: Path,
) -> None:
    store = LocalObjectStore(tmp_path)
    await store.put("p/old", b"x")
    await store.put("q/other", b"x")  # not under the sweep's prefix
    now = [0]

    async def caught_up() -> None:  # an object put while the catalog catches up
        await store.put("p/new", b"x")

    sweep = OrphanSweep(store, "p/", caught_up, lambda: now[0], GRACE)
    listing = await sweep.begin()
    assert listing.keys == ["p/old"]  # listed before the catch-up put p/new
    assert await sweep.finish(listing, set()) == []
    now[0] = GRACE
    listing = await sweep.begin()
    assert await sweep.finish(listing, {"p/kept"}) == ["p/old"]  # p/new first seen just now
    assert await store.keys("") == ["p/new", "q/other"]


async def test_a_pass_that_meets_what_a_request_gets_503_or_504_for_is_tried_again() -> None:
    """Nothing a request would be answered 503 or 504 for ends the collector's task (the
    process would stop): each failed pass is logged and the next one runs."""
    failures: list[Exception] = [
        OutcomeUnknown("the outcome of this write could not be learned"),
        LogUnavailable("kafka away"),
        ObjectStoreError("S3 away", retriable=True),
        BrokerUnavailable("no broker"),
    ]
    clean = asyncio.Event()

    async def once() -> None:
        if failures:
            raise failures.pop(0)
        clean.set()

    task = asyncio.create_task(collect_forever(once, 0, "test"))
    waiting = asyncio.create_task(clean.wait())
    await asyncio.wait([task, waiting], timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    assert not task.done(), f"the collector stopped: {task.exception()!r}"
    assert clean.is_set()
    task.cancel()
    await asyncio.gather(task, waiting, return_exceptions=True)
