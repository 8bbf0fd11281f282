"""The collector's decision: only blobs seen unreferenced for a whole grace period go."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapter.log.errors import LogUnavailable, OutcomeUnknown
from adapter.objects.base import ObjectStoreError
from adapter.objects.local import LocalObjectStore
from adapter.protocol.snapshots import object_key
from adapter.service.snapshot_gc import OrphanSweep, collect_forever, due, window_of, windowed
from adapter.tier import chunks
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


def test_a_blob_whose_uploader_allows_itself_longer_waits_twice_that() -> None:
    # An instance given a grace period of 1,000 ms publishes within 500; a collector given
    # 100 ms must still wait 1,000 before it takes that blob for an orphan.
    key = object_key("bucket", "s", 7, windowed("u", 500))
    doomed, seen = due([key], set(), {}, 0, GRACE)
    doomed, seen = due([key], set(), seen, 999, GRACE)
    assert (doomed, seen) == ([], {key: 0})
    assert due([key], set(), seen, 1_000, GRACE) == ([key], {})
    # A window shorter than half the grace period changes nothing.
    short = object_key("bucket", "s", 7, windowed("v", 10))
    assert due([short], set(), {short: 0}, GRACE, GRACE) == ([short], {})
    # Seen referenced before, the blob was committed: no upload of it is under way.
    assert due([key], set(), {key: 0}, GRACE, GRACE, committed={key}) == ([key], {})


def test_every_uploaded_key_names_its_window_and_old_keys_none() -> None:
    tier = chunks.object_key("p.b", 17, 0, 5, 9, "s/~w9/x", windowed(chunks.new_attempt(), 42))
    assert window_of(tier) == 42  # the attempt's segment, before the stream's digest
    assert window_of(object_key("bucket", "~w77", 7, windowed("u", 1_500))) == 1_500
    assert window_of(object_key("bucket", "s", 7, "u")) == 0  # written before keys named it
    assert window_of(chunks.object_key("p.b", 17, 0, 5, 9, "s", "a1")) == 0


async def test_a_sweep_waits_out_an_upload_window_only_for_what_it_never_saw_referenced(
    tmp_path: Path,
) -> None:
    store = LocalObjectStore(tmp_path)
    dropped, orphan = f"p/a{windowed('1', 1_000)}", f"p/b{windowed('2', 1_000)}"
    await store.put(dropped, b"x")
    await store.put(orphan, b"x")
    now = [0]

    async def caught_up() -> None:
        pass

    sweep = OrphanSweep(store, "p/", caught_up, lambda: now[0], GRACE)
    assert await sweep.finish(await sweep.begin(), {dropped}) == []  # committed, referenced
    assert await sweep.finish(await sweep.begin(), set()) == []  # dropped: first seen so
    now[0] = GRACE
    assert await sweep.finish(await sweep.begin(), set()) == [dropped]
    now[0] = 1_999
    assert await sweep.finish(await sweep.begin(), set()) == []
    now[0] = 2_000  # twice the orphan's window since it was first seen
    assert await sweep.finish(await sweep.begin(), set()) == [orphan]


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
