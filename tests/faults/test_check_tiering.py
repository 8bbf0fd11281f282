"""The checker's rules where tiering meets the history: the log is Kafka's records with the cold
tier's, reads and bootstraps are checked against both, and a bucket created again starts a new
history. A clean history passes, and each doctored one is reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.faults.check import KINDS, LAG_S, check
from tests.faults.history import (
    Bootstrap,
    BucketEvent,
    ColdTier,
    History,
    LogRecord,
    Outcome,
    Publish,
    Read,
    View,
    Write,
)


def tiered() -> tuple[History, list[LogRecord], ColdTier]:
    """Stream s: appends a0..a5 (tails 2..7), offsets 1..6 after its create at 0; Kafka freed
    everything below 4, which the cold tier holds (a0..a2); 3 is in both."""
    history = History()
    records = [LogRecord("s", 0, None, "create")]
    for n in range(6):
        history.writes.append(Write("s", f"a{n}", n, n + 0.5, Outcome.ACK, 200, next_offset=n + 2))
        records.append(LogRecord("s", n + 1, f"a{n}"))
    cold = ColdTier([r for r in records if r.payload is not None and r.offset <= 4])
    return history, [r for r in records if r.offset >= 4], cold


def reported(history: History, log: list[LogRecord], **kwargs: object) -> dict[str, int]:
    report = check("doctored", history, log, **kwargs)  # type: ignore[arg-type]
    return {kind: report.count(kind) for kind in KINDS if report.count(kind)}


def test_records_only_the_cold_tier_holds_are_not_lost() -> None:
    history, log, cold = tiered()
    assert reported(history, log, cold=cold) == {}
    assert reported(history, log) == {"lost": 3}  # without the cold tier: a0..a2 missing
    assert check("cold", history, log, cold=cold).cold_records == 4


def test_a_listed_chunk_missing_from_the_store_is_reported() -> None:
    history, log, cold = tiered()
    gone = ColdTier([r for r in cold.records if r.offset > 1], ["tier/t/1/0/x.avro"])
    assert reported(history, log, cold=gone) == {"cold": 1, "lost": 1}


def test_a_chunk_unlike_kafka_is_reported() -> None:
    history, log, cold = tiered()
    other = ColdTier([*cold.records[:-1], replace(cold.records[-1], payload="a9")])
    assert reported(history, log, cold=other)["cold"] == 1


def test_a_cold_read_missing_records_is_reported_and_counted() -> None:
    history, log, cold = tiered()
    history.reads.append(Read("s", 0, 5, ("a0", "a1", "a2", "a3"), 9.0, "catchup", 8.0))
    report = check("read", history, log, cold=cold)
    assert report.ok, report.details()
    assert report.cold_reads == 1
    history.reads[-1] = replace(history.reads[-1], payloads=("a3",))  # [0, 4) read as empty
    # unlike the log, and without appends acknowledged in that range
    assert reported(history, log, cold=cold) == {"stale_reads": 2}


def test_a_read_up_to_date_without_an_append_acknowledged_long_before_is_reported() -> None:
    history, log, cold = tiered()
    late = 5.5 + LAG_S + 1  # a5 (tail 7) was acknowledged at 5.5
    history.reads.append(Read("s", 5, 6, ("a4",), late, "catchup", late, up_to_date=True))
    assert reported(history, log, cold=cold) == {"stale_reads": 1}
    history.reads[-1] = replace(history.reads[-1], up_to_date=False)  # a page, not the end
    assert reported(history, log, cold=cold) == {}
    soon = Read("s", 5, 6, ("a4",), 6.0, "catchup", 6.0, up_to_date=True)
    history.reads[-1] = soon  # within the lag an instance may have
    assert reported(history, log, cold=cold) == {}


def test_a_bootstrap_is_checked_against_the_history() -> None:
    history, log, cold = tiered()
    late = 5.5 + LAG_S + 1
    history.publishes.append(Publish("s", 2, "b", 6.0, 6.1, Outcome.ACK, 204))
    whole = Bootstrap("s", 2, "b", 7, ("a1", "a2", "a3", "a4", "a5"), late, late + 1)
    history.bootstraps.append(whole)
    report = check("bootstrap", history, log, cold=cold)
    assert report.ok, report.details()
    assert report.cold_reads == 1
    for broken, problems in (
        # the cold part read as empty: unlike the log, and acknowledged appends missing
        (replace(whole, payloads=("a3", "a4", "a5")), 2),
        (replace(whole, next_offset=6, payloads=("a1", "a2", "a3", "a4")), 1),  # not up to date
        (replace(whole, snapshot="other"), 1),  # a snapshot no publish gave
    ):
        history.bootstraps[-1] = broken
        assert reported(history, log, cold=cold) == {"bootstraps": problems}, broken


def test_below_a_visible_snapshot_freed_records_are_neither_lost_nor_misread() -> None:
    history, log, cold = tiered()
    history.publishes.append(Publish("s", 3, "b", 6.0, 6.1, Outcome.ACK, 204))
    history.reads.append(Read("s", 0, 5, ("a0", "a1", "a2", "a3"), 5.0, "catchup", 4.0))
    kept = ColdTier([r for r in cold.records if r.offset >= 3])  # a0, a1 collected
    seen = {"fresh": {"s": View(200, 7, False, ("a2", "a3", "a4", "a5"), 3, "b", 410)}}
    report = check("floor", history, log, seen, "fresh", cold=kept)
    assert report.ok, report.details()
    assert report.freed == 2
    history.reads[-1] = replace(history.reads[-1], payloads=("a0", "a1", "a3"))  # a2 skipped
    assert reported(history, log, views=seen, fresh="fresh", cold=kept) == {"stale_reads": 2}
    below = Read("s", 0, 3, ("a0", "a1"), 5.0, "catchup", 4.0)  # all of it freed since
    history.reads[-1] = below
    assert reported(history, log, views=seen, fresh="fresh", cold=kept) == {}
    history.reads[-1] = replace(below, payloads=("a0", "zz"))  # never appended to s, a1 not
    assert reported(history, log, views=seen, fresh="fresh", cold=kept) == {"stale_reads": 2}


def test_an_acknowledged_append_missing_from_a_read_is_reported_after_the_log_freed_it() -> None:
    """A bootstrap from an older snapshot that skipped a chunk collected under it: by the end
    a newer snapshot freed that range from the log too, yet the history says what was there."""
    history, log, _ = tiered()
    history.publishes.append(Publish("s", 1, "old", 6.0, 6.1, Outcome.ACK, 204))
    history.publishes.append(Publish("s", 5, "new", 7.0, 7.1, Outcome.ACK, 204))
    seen = {"fresh": {"s": View(200, 7, False, ("a4", "a5"), 5, "new", 410)}}
    boot = Bootstrap("s", 1, "old", 7, ("a0", "a1", "a2", "a3", "a4", "a5"), 6.5, 6.6)
    history.bootstraps.append(boot)
    freed = ColdTier([])  # a0..a3 gone from Kafka and from the cold tier
    assert reported(history, log, views=seen, fresh="fresh", cold=freed) == {}
    history.bootstraps[-1] = replace(boot, payloads=("a0", "a3", "a4", "a5"))  # a1, a2 skipped
    report = check("skipped", history, log, seen, "fresh", cold=freed)
    assert report.count("bootstraps") == 1
    assert "a1" in report.details()


def test_a_close_freed_with_its_streams_beginning_is_seen_closed() -> None:
    history, log, cold = tiered()
    history.writes.append(Write("s", None, 7.0, 7.1, Outcome.ACK, 204, close=True))
    closed = {"fresh": {"s": View(200, 7, True, tuple(f"a{n}" for n in range(6)))}}
    freed = log  # its create record is gone: tiering freed the stream's beginning
    assert reported(history, freed, views=closed, fresh="fresh", cold=cold) == {}
    still_open = {"fresh": {"s": replace(closed["fresh"]["s"], closed=False)}}
    assert reported(history, freed, views=still_open, fresh="fresh", cold=cold) == {"lost": 1}
    whole = [LogRecord("s", 0, None, "create"), *log]  # its beginning still there: no close
    assert reported(history, whole, views=closed, fresh="fresh", cold=cold) == {"lost": 1}


def recreated() -> History:
    """Bucket `rb`: created, `rb/s` appended to (o1), the bucket deleted (sent at 10) and
    created again (answered at 12), `rb/s` appended to again (n1, sent after; o2 in between)."""
    history = History()
    history.buckets += [
        BucketEvent("rb", "create", 0.0, 0.1, Outcome.ACK, 201),
        BucketEvent("rb", "delete", 10.0, 10.5, Outcome.TIMEOUT),
        BucketEvent("rb", "delete", 11.0, 11.1, Outcome.REJECTED, 404),
        BucketEvent("rb", "create", 11.5, 12.0, Outcome.ACK, 201),
    ]
    history.writes += [
        Write("rb/s", "o1", 1.0, 1.1, Outcome.ACK, 204),
        Write("rb/s", "o2", 9.9, 10.2, Outcome.ACK, 204),
        Write("rb/s", "n1", 13.0, 13.1, Outcome.ACK, 204),
    ]
    history.reads.append(Read("rb/s", 0, 2, ("o1",), 2.0, "catchup", 1.5))
    history.reads.append(Read("rb/s", 0, 2, ("n1",), 14.0, "catchup", 13.5))
    return history


def test_a_bucket_created_again_ends_the_old_history_and_checks_the_new() -> None:
    history = recreated()
    log = [LogRecord("rb/s", 0, None, "create"), LogRecord("rb/s", 1, "n1")]
    report = check("recreated", history, log)
    assert report.ok, report.details()
    assert report.ended == 2  # o1 and the read of it
    without_new = log[:1]
    assert reported(history, without_new) == {"lost": 1, "stale_reads": 1}
    old_again = [*log, LogRecord("rb/s", 2, "o2")]  # in between: either way
    assert reported(history, old_again) == {}


def test_a_bucket_whose_deletes_were_refused_is_checked_as_one_history() -> None:
    history = recreated()
    for index in (1, 2):  # 409 bucket_not_empty: nothing was deleted
        history.buckets[index] = replace(
            history.buckets[index], outcome=Outcome.REJECTED, status=409
        )
    history.buckets[3] = replace(history.buckets[3], outcome=Outcome.REJECTED, status=409)
    log = [LogRecord("rb/s", 0, None, "create"), LogRecord("rb/s", 1, "n1")]
    assert reported(history, log)["lost"] == 2  # o1, o2


def test_without_its_create_again_a_deleted_bucket_is_checked_as_one_history() -> None:
    history = recreated()
    history.buckets.pop()
    log = [LogRecord("rb/s", 0, None, "create"), LogRecord("rb/s", 1, "n1")]
    assert reported(history, log)["lost"] == 2  # o1, o2


@pytest.mark.parametrize("status", [201, 409])
def test_a_create_that_had_landed_starts_the_new_history(status: int) -> None:
    history = recreated()
    outcome = Outcome.ACK if status == 201 else Outcome.REJECTED
    history.buckets[-1] = replace(history.buckets[-1], outcome=outcome, status=status)
    log = [LogRecord("rb/s", 0, None, "create"), LogRecord("rb/s", 1, "n1")]
    assert reported(history, log) == {}
