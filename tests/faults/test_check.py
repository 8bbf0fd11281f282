"""The checker is shown to fail: a clean history passes, and each doctored one is reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.cluster import slot_of
from tests.faults.check import KINDS, LAG_S, check
from tests.faults.history import (
    Fork,
    History,
    Lifecycle,
    LogRecord,
    Outcome,
    Producer,
    Publish,
    Read,
    Trim,
    View,
    Write,
)
from tests.faults.kafka_log import stream_name
from tests.faults.kafka_probe import Commit, KafkaProbe, longest_joint
from tests.faults.runner import unavailable_by_slot


def clean() -> tuple[History, list[LogRecord]]:
    """Producer p writes seq 0..2 to s (seq 1 retried after a timeout), a plain append and a
    rejected one, a close; a long-poll read what was there."""
    history = History()
    log = [LogRecord("s", 0, None, "create")]
    for seq in range(3):
        stamp = Producer("p", 0, seq)
        if seq == 1:
            history.writes.append(Write("s", "p1", 1.0, 2.0, Outcome.TIMEOUT, 0, stamp))
        history.writes.append(Write("s", f"p{seq}", 2.0 + seq, 2.5 + seq, Outcome.ACK, 200, stamp))
        log.append(LogRecord("s", 1 + seq, f"p{seq}", producer=stamp))
    history.writes.append(Write("s", "x", 6.0, 6.1, Outcome.ACK, 204))
    history.writes.append(Write("s", "y", 6.2, 6.3, Outcome.REJECTED, 409))
    log.append(LogRecord("s", 4, "x"))
    history.writes.append(Write("s", None, 7.0, 7.1, Outcome.ACK, 204, close=True))
    log.append(LogRecord("s", 6, None, "close"))  # 5: a transaction marker
    history.writes.append(Write("s", "z", 8.0, 8.1, Outcome.REJECTED, 409))
    history.reads.append(Read("s", 0, 3, ("p0", "p1"), 4.0, "long-poll"))
    history.reads.append(Read("s", 3, 5, ("p2", "x"), 7.2, "sse"))
    return history, log


def views(
    payloads: tuple[str, ...], other: tuple[str, ...] | None = None
) -> dict[str, dict[str, View]]:
    fresh = View(200, 7, True, payloads)
    return {"fresh": {"s": fresh}, "a": {"s": replace(fresh, payloads=other or payloads)}}


def reported(history: History, log: list[LogRecord], **kwargs: object) -> dict[str, int]:
    report = check("doctored", history, log, **kwargs)  # type: ignore[arg-type]
    return {kind: report.count(kind) for kind in KINDS if report.count(kind)}


def test_a_clean_history_passes() -> None:
    history, log = clean()
    report = check("clean", history, log, views(("p0", "p1", "p2", "x")), "fresh")
    assert report.ok, report.details()
    assert report.acknowledged == 5
    assert "lost=0 duplicated=0 reordered=0" in report.line()


def test_a_duplicated_record_is_reported() -> None:
    history, log = clean()
    log.append(LogRecord("s", 3, "p1", producer=Producer("p", 0, 1)))  # the retry, again
    log.sort(key=lambda r: r.offset)
    assert "duplicated" in reported(history, log)


def test_a_missing_acknowledged_append_is_reported() -> None:
    history, log = clean()
    log = [r for r in log if r.payload != "x"]
    assert reported(history, log) == {"lost": 1, "stale_reads": 1}


def test_a_missing_acknowledged_close_is_reported() -> None:
    history, log = clean()
    assert reported(history, [r for r in log if r.control != "close"]) == {"lost": 1}


def test_a_reordered_producer_is_reported() -> None:
    history, log = clean()
    log[1], log[2] = replace(log[2], offset=1), replace(log[1], offset=2)
    assert reported(history, log)["reordered"] == 1


def test_data_of_a_rejected_request_is_reported() -> None:
    history, log = clean()
    log.insert(5, LogRecord("s", 5, "y"))  # answered 409, yet written
    assert reported(history, log) == {"phantom": 1}


def test_data_of_a_failed_request_is_reported() -> None:
    history, log = clean()
    history.writes.append(Write("s", "w", 6.4, 6.5, Outcome.FAILED, 503))
    log.insert(5, LogRecord("s", 5, "w"))
    assert reported(history, log) == {"phantom": 1}


def test_data_after_a_close_is_reported() -> None:
    history, log = clean()
    log.append(LogRecord("s", 7, "z"))
    assert reported(history, log) == {"closure": 1, "phantom": 1}


def test_an_append_acknowledged_after_the_close_is_reported() -> None:
    history, log = clean()
    history.writes.append(Write("s", "late", 9.0, 9.1, Outcome.ACK, 204))
    log.insert(5, LogRecord("s", 5, "late"))
    assert reported(history, log) == {"closure": 1}


@pytest.mark.parametrize(
    "read",
    [
        Read("s", 0, 3, ("p0", "p1", "gone"), 4.0, "long-poll"),  # served, later not in Kafka
        Read("s", 0, 3, ("p1", "p0"), 4.0, "sse"),  # out of order
        Read("s", 0, 3, ("p0",), 4.0, "get"),  # a record skipped
    ],
)
def test_a_read_unlike_the_log_is_reported(read: Read) -> None:
    history, log = clean()
    history.reads.append(read)
    assert reported(history, log) == {"stale_reads": 1}


def test_an_instance_unlike_a_fresh_replay_is_reported() -> None:
    history, log = clean()
    both = views(("p0", "p1", "p2", "x"), ("p0", "p1", "p2", "x", "p1"))
    assert reported(history, log, views=both, fresh="fresh") == {"divergent": 1}


def test_a_fresh_replay_unlike_the_log_is_reported() -> None:
    history, log = clean()
    stale = views(("p0", "p1", "p2"))
    assert reported(history, log, views=stale, fresh="fresh") == {"divergent": 1}


# -- snapshots and forks ---------------------------------------------------------------------


def with_snapshot_and_fork() -> tuple[History, list[LogRecord], dict[str, dict[str, View]]]:
    """`s` as in `clean`, a snapshot of it at offset 3 (a first attempt timed out, its retry
    acknowledged), and `f` forked from it at 2 with one record of its own; the views agree."""
    history, log = clean()
    history.publishes.append(Publish("s", 3, "b1", 9.0, 9.5, Outcome.TIMEOUT))
    history.publishes.append(Publish("s", 3, "b1", 9.6, 9.7, Outcome.ACK, 204))
    history.reads.append(Read("s", 3, 5, ("p2", "x"), 9.9, "get", 9.8))
    history.forks.append(Fork("f", "s", 2, 10.0, 10.1, Outcome.ACK, 201))
    history.writes.append(Write("f", "f1", 10.2, 10.3, Outcome.ACK, 204))
    log += [LogRecord("f", 8, None, "create"), LogRecord("f", 9, "f1")]
    history.reads.append(Read("f", 0, 10, ("p0", "f1"), 10.5, "get", 10.4))
    s = View(200, 7, True, ("p2", "x"), 3, "b1", 410)
    f = View(200, 10, False, ("p0", "f1"))
    return history, log, {"fresh": {"s": s, "f": f}, "a": {"s": s, "f": f}}


def test_a_history_with_snapshots_and_forks_passes() -> None:
    history, log, seen = with_snapshot_and_fork()
    assert reported(history, log, views=seen, fresh="fresh") == {}


@pytest.mark.parametrize(
    ("view", "why"),
    [
        (View(200, 7, True, ("p0", "p1", "p2", "x")), "the acknowledged snapshot is not visible"),
        (View(200, 7, True, ("p2", "x"), 3, "b0", 410), "another blob"),
    ],
)
def test_a_snapshot_lost_or_wrong_is_reported(view: View, why: str) -> None:
    history, log, seen = with_snapshot_and_fork()
    seen = {name: found | {"s": view} for name, found in seen.items()}
    assert reported(history, log, views=seen, fresh="fresh")["snapshots"] == 1, why


def test_an_instance_serving_below_a_snapshot_is_reported() -> None:
    history, log, seen = with_snapshot_and_fork()
    served = View(200, 7, True, ("p2", "x"), 3, "b1", 200)
    broken = seen | {"a": seen["a"] | {"s": served}}
    assert reported(history, log, views=broken, fresh="fresh") == {"snapshots": 1, "divergent": 1}
    everywhere = {name: found | {"s": served} for name, found in seen.items()}
    assert reported(history, log, views=everywhere, fresh="fresh") == {"snapshots": 2}


def test_a_snapshot_of_a_refused_publish_is_reported() -> None:
    history, log, seen = with_snapshot_and_fork()
    history.publishes.append(Publish("s", 4, "b2", 11.0, 11.1, Outcome.FAILED, 503))
    later = View(200, 7, True, ("x",), 4, "b2", 410)
    seen = {name: found | {"s": later} for name, found in seen.items()}
    assert reported(history, log, views=seen, fresh="fresh") == {"snapshots": 1}


def test_a_read_below_an_acknowledged_retention_is_reported() -> None:
    history, log, seen = with_snapshot_and_fork()
    history.reads.append(Read("s", 0, 5, ("p0", "p1", "p2", "x"), 30.0, "get", 29.0))
    assert reported(history, log, views=seen, fresh="fresh") == {"retention": 1}
    # a read that began before the publish was acknowledged, or before every instance could
    # have learnt it, may have been served
    for invoked in (9.65, 9.7 + LAG_S - 1):
        history.reads[-1] = replace(history.reads[-1], invoked=invoked)
        assert reported(history, log, views=seen, fresh="fresh") == {}


def test_a_fork_missing_or_with_the_wrong_inherited_range_is_reported() -> None:
    history, log, seen = with_snapshot_and_fork()
    gone = {name: found | {"f": View(404, None, False, ())} for name, found in seen.items()}
    assert reported(history, log, views=gone, fresh="fresh") == {"forks": 1}
    history.reads.append(Read("f", 0, 10, ("p0", "p1", "f1"), 12.0, "get", 11.0))  # past 2
    assert reported(history, log, views=seen, fresh="fresh") == {"stale_reads": 1}
    wide = View(200, 10, False, ("p0", "p1", "f1"))
    seen = {name: found | {"f": wide} for name, found in seen.items()}
    assert reported(history, log[:-1] + log[-1:], views=seen, fresh="fresh")["divergent"] == 1


def _deleted_stream(history: History, log: list[LogRecord], keep_create: bool) -> None:
    """Stream d: created, one acknowledged append, deleted; only the delete record (or the
    create too) left in the log, as after retention freed the partition's prefix."""
    history.writes.append(Write("d", "d0", 9.0, 9.1, Outcome.ACK, 204))
    history.lifecycle.append(Lifecycle("d", "create", 8.5, 8.6, Outcome.ACK, 201))
    history.lifecycle.append(Lifecycle("d", "delete", 9.5, 9.6, Outcome.ACK, 204))
    if keep_create:
        log.append(LogRecord("d", 10, None, "create"))
    log.append(LogRecord("d", 13, None, "delete"))


def test_a_deleted_streams_records_freed_by_retention_are_not_lost() -> None:
    history, log = clean()
    _deleted_stream(history, log, keep_create=False)
    report = check("freed", history, log, log_starts={"d": 12})
    assert report.count("lost") == 0
    assert report.freed == 1


def test_a_deleted_streams_append_missing_is_lost_unless_the_log_start_moved_past_it() -> None:
    history, log = clean()
    _deleted_stream(history, log, keep_create=False)
    assert reported(history, log) == {"lost": 1}  # nothing was freed: the log start is 0
    history, log = clean()
    _deleted_stream(history, log, keep_create=True)
    assert reported(history, log, log_starts={"d": 12}) == {"lost": 1}  # its create is there


def test_the_line_names_each_slots_unavailability_and_the_faults_notes() -> None:
    report = check("f", History(), [])
    report.unavailable_by_slot = {0: 1.25, 3: 0.4}
    report.notes = {"exited_after": "1.0s"}
    assert report.line().endswith(" unavailable_by_slot=0:1.2s,3:0.4s exited_after=1.0s")


def test_a_slot_is_unavailable_from_a_failed_write_until_the_next_acknowledged_one() -> None:
    writes = [
        Write("s", "a", 0.0, 1.0, Outcome.ACK, 204),
        Write("s", "b", 2.0, 2.5, Outcome.FAILED, 503),
        Write("s", "c", 3.0, 3.5, Outcome.FAILED, 503),
        Write("s", "d", 4.0, 5.0, Outcome.ACK, 204),
        Write("s", "e", 20.0, 21.0, Outcome.ACK, 204),  # idle before it: not unavailable
    ]
    assert unavailable_by_slot("p.", writes) == {slot_of("p.", "s"): 3.0}


def test_kafkas_own_share_is_split_from_the_longest_outage() -> None:
    """The probe's longest gap between commits is Kafka's share; the rest is the adapters'."""
    commits = [(0.0, 0.1, True), (0.2, 3.2, False), (3.3, 6.3, False), (6.4, 6.5, True)]
    probe = KafkaProbe("unused:9092", "t", 0, "fault-probe-0")
    probe.commits = [Commit(*c) for c in commits]
    assert probe.longest_unavailable() == pytest.approx(6.4)
    history, log = clean()
    report = check("split", history, log)
    assert "kafka_unavailable" not in report.line()  # not probed: nothing claimed
    report.longest_unavailable_s, report.kafka_unavailable_s = 9.0, probe.longest_unavailable()
    assert report.adapter_unavailable_s == pytest.approx(2.6)
    assert "kafka_unavailable=6.4s adapter_share=2.6s" in report.line()


def test_kafkas_own_share_joins_the_transaction_and_group_outages() -> None:
    """A coordinator out for transactions from 2 to 5 and for the group from 4 to 9: an
    adapter needs both, so Kafka was out from 2 to 9; short gaps are not outages."""

    def commits(*spans: tuple[float, float]) -> list[Commit]:
        """Successful commits every 0.5 s from 0 to 12, none within the spans."""
        times = [t / 2 for t in range(25) if not any(a < t / 2 < b for a, b in spans)]
        return [Commit(t, t, True) for t in times]

    transactions, group = commits((2.0, 5.0)), commits((4.0, 9.0))
    assert longest_joint(transactions, group) == pytest.approx(7.0)
    assert longest_joint(transactions, commits((6.0, 7.0))) == pytest.approx(3.0)  # apart
    assert longest_joint(commits(), commits()) == pytest.approx(0.5)  # only the spacing
    slow = [Commit(t * 1.5, t * 1.5, True) for t in range(9)]  # each 1.5 s after the last
    assert longest_joint(slow, commits()) == pytest.approx(1.5)  # slow, never out


def trimmed() -> tuple[History, list[LogRecord], dict[str, dict[str, View]]]:
    """The clean history with a trim below offset 3 acknowledged at 7.5, Kafka's copy of
    everything below it freed, and both instances serving the stream from there."""
    history, log = clean()
    tails = {"p0": 2, "p1": 3, "p2": 4, "x": 5}  # each acknowledged append's answered tail
    history.writes = [
        replace(w, next_offset=tails[w.payload])
        if w.outcome is Outcome.ACK and w.payload in tails
        else w
        for w in history.writes
    ]
    history.trims.append(Trim("s", 3, 7.4, 7.5, Outcome.ACK, 204))
    freed = [r for r in log if r.offset >= 3]
    fresh = View(200, 7, True, ("p2", "x"), below=410, earliest=3)
    return history, freed, {"fresh": {"s": fresh}, "a": {"s": fresh}}


def test_a_trim_frees_what_lies_below_it() -> None:
    history, log, seen = trimmed()
    report = check("trimmed", history, log, seen, "fresh")
    assert report.ok, report.details()
    assert report.freed == 2  # p0 and p1, acknowledged below the trim point


def test_a_read_below_an_acknowledged_trim_is_reported() -> None:
    history, log, seen = trimmed()
    sent = 7.5 + LAG_S + 1
    history.reads.append(Read("s", 0, 3, ("p0", "p1"), sent + 0.1, "get", invoked=sent))
    assert reported(history, log, views=seen, fresh="fresh") == {"retention": 1}


def test_a_trim_that_moved_back_is_reported() -> None:
    history, log, seen = trimmed()
    earlier = replace(seen["fresh"]["s"], payloads=("p1", "p2", "x"), earliest=2)
    log.insert(0, LogRecord("s", 2, "p1", producer=Producer("p", 0, 1)))
    moved = {"fresh": {"s": earlier}, "a": {"s": earlier}}
    assert reported(history, log, views=moved, fresh="fresh") == {"retention": 1}


def test_a_fork_housed_in_another_buckets_topic_is_named_as_the_load_names_it() -> None:
    assert stream_name("xforks//f1", "") == "xforks/f1"
    assert stream_name("xforks//f1", "other/") == "xforks/f1"
    assert stream_name("plain", "other/") == "other/plain"
