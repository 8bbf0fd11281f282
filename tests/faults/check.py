"""The checker: a recorded history against what Kafka holds, and each instance's final view
against a fresh replay. Pure: the runner gathers the inputs, this decides.

Invariants (each breach is an anomaly, and any anomaly fails the run):
- lost: an acknowledged append (or close) is not in the log — unless its stream was deleted
  and the log no longer holds even the stream's create record while its partition's log start
  has moved: retention frees a partition's prefix that no live stream needs, so a deleted
  stream's records go (counted as `freed`, not an anomaly);
- duplicated: one logical append is in the log more than once;
- reordered: a producer's records are not in increasing `Producer-Seq` order;
- phantom: data whose every attempt was answered 4xx (or every one 5xx) is in the log;
- closure: data after a stream's close record, or an append acknowledged after its close was;
- stale reads: what a client was served differs from the log's data records at those offsets
  (for a fork: its source's below the fork offset, then its own);
- divergent: an instance's HEAD/GET of a stream differs (still, after up to 15 s) from a fresh
  instance's, or the fresh instance's from the log;
- snapshots: a stream's visible snapshot (on the fresh instance) is older than one whose
  publish was acknowledged, is at an offset no publish that could have landed named, or is not
  that publish's blob; or an instance does not refuse (410) a read from -1 of a stream with a
  snapshot;
- retention: a read began `LAG_S` after a publish at `o` was acknowledged (the lag every
  instance is allowed to learn a change, as for divergent views), started below `o`, and was
  served;
- forks: an acknowledged fork does not exist (its inherited range is checked as its reads and
  views are).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tests.faults.history import Fork, History, LogRecord, Outcome, View, Write

# How long an instance may take to learn what another acknowledged (its follower): the runner's
# CONVERGE_S, which the views are given too.
LAG_S = 15.0

KINDS = (
    "lost",
    "duplicated",
    "reordered",
    "phantom",
    "closure",
    "stale_reads",
    "divergent",
    "snapshots",
    "retention",
    "forks",
)


@dataclass
class Report:
    name: str
    operations: int = 0
    acknowledged: int = 0
    longest_unavailable_s: float = 0.0
    freed: int = 0  # acknowledged appends of deleted streams whose records retention freed
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def add(self, kind: str, detail: str) -> None:
        self.anomalies[kind].append(detail)

    def count(self, kind: str) -> int:
        return len(self.anomalies[kind])

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def line(self) -> str:
        counts = " ".join(f"{kind}={self.count(kind)}" for kind in KINDS)
        return (
            f"{self.name}: operations={self.operations} acknowledged={self.acknowledged} "
            f"{counts} freed={self.freed} longest_unavailable={self.longest_unavailable_s:.1f}s"
        )

    def details(self, limit: int = 5) -> str:
        return "\n".join(
            f"  {kind}: {detail}"
            for kind, found in self.anomalies.items()
            for detail in found[:limit]
        )


def check(
    name: str,
    history: History,
    log: Iterable[LogRecord],
    views: Mapping[str, Mapping[str, View]] | None = None,
    fresh: str = "",
    log_starts: Mapping[str, int] | None = None,
) -> Report:
    """`log_starts`: per stream, the log start offset of its partition (absent: 0)."""
    records = sorted(log, key=lambda r: (r.stream, r.offset))
    by_stream: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_stream[record.stream].append(record)
    report = Report(name, history.operations)
    report.acknowledged = sum(w.outcome is Outcome.ACK for w in history.writes)
    report.longest_unavailable_s = longest_unavailable(history.writes)
    freed = _freed_streams(history, by_stream, log_starts or {})
    _exactly_once(report, history.writes, records, freed)
    _producer_order(report, records)
    _closures(report, history.writes, by_stream)
    histories = _histories(by_stream, history.forks)
    _reads(report, history, histories)
    _retention(report, history)
    if views:
        _views(report, views, fresh, histories)
        _snapshots(report, history, views[fresh])
        _refused_below(report, views)
        _forks(report, history.forks, views[fresh])
    return report


class _Histories:
    """Each stream's records as its reads see them: a fork's source's below the fork offset
    (recursively), then its own."""

    def __init__(self, by_stream: Mapping[str, list[LogRecord]], forks: Mapping[str, Fork]):
        self.by_stream = by_stream
        self.forks = forks

    def of(self, stream: str, depth: int = 0) -> list[LogRecord]:
        fork = self.forks.get(stream)
        own = self.by_stream.get(stream, [])
        if fork is None or depth > 16:
            return own
        inherited = [r for r in self.of(fork.source, depth + 1) if r.offset < fork.offset]
        return inherited + own


def _histories(by_stream: Mapping[str, list[LogRecord]], forks: list[Fork]) -> _Histories:
    acknowledged = {f.stream: f for f in forks if f.outcome is Outcome.ACK}
    return _Histories(by_stream, acknowledged)


def _freed_streams(
    history: History, by_stream: Mapping[str, list[LogRecord]], log_starts: Mapping[str, int]
) -> set[str]:
    """Deleted streams whose beginning (their create record) the log no longer holds, in a
    partition whose log start moved: retention freed their records."""
    deleted = {event.stream for event in history.lifecycle if event.action == "delete"}
    return {
        stream
        for stream in deleted
        if log_starts.get(stream, 0) > 0
        and not any(r.control == "create" for r in by_stream.get(stream, []))
    }


def _exactly_once(
    report: Report, writes: list[Write], records: list[LogRecord], freed: set[str]
) -> None:
    found = Counter(r.payload for r in records if r.payload is not None)
    attempts: dict[str, list[Write]] = defaultdict(list)
    for write in writes:
        if write.payload is not None:
            attempts[write.payload].append(write)
    for payload, tries in attempts.items():
        outcomes = {t.outcome for t in tries}
        if Outcome.ACK in outcomes and found[payload] == 0:
            if tries[0].stream in freed:
                report.freed += 1
            else:
                report.add("lost", f"{payload} acknowledged on {tries[0].stream}, not in the log")
        if found[payload] and outcomes <= {Outcome.REJECTED}:
            report.add("phantom", f"{payload}: every attempt answered 4xx, yet in the log")
        if found[payload] and outcomes <= {Outcome.FAILED}:
            report.add("phantom", f"{payload}: every attempt answered 5xx, yet in the log")
    for payload, count in found.items():
        if count > 1:
            report.add("duplicated", f"{payload} is in the log {count} times")


def _producer_order(report: Report, records: list[LogRecord]) -> None:
    last: dict[tuple[str, str, int], int] = {}
    for record in records:
        if record.producer is None:
            continue
        key = (record.stream, record.producer.producer_id, record.producer.epoch)
        if key in last and record.producer.seq <= last[key]:
            report.add(
                "reordered",
                f"{key}: seq {record.producer.seq} at offset {record.offset} after {last[key]}",
            )
        last[key] = max(last.get(key, -1), record.producer.seq)


def _closures(
    report: Report, writes: list[Write], by_stream: Mapping[str, list[LogRecord]]
) -> None:
    for stream, records in by_stream.items():
        closes = [r.offset for r in records if r.control == "close"]
        if closes:
            after = [r for r in records if r.payload is not None and r.offset > closes[0]]
            if after:
                report.add("closure", f"{stream}: {len(after)} data record(s) after its close")
    closed_at: dict[str, float] = {}
    for write in writes:
        if write.close and write.outcome is Outcome.ACK:
            closed_at[write.stream] = min(
                closed_at.get(write.stream, write.completed), write.completed
            )
            if not any(r.control == "close" for r in by_stream.get(write.stream, [])):
                report.add("lost", f"{write.stream}: close acknowledged, no close record")
    for write in writes:
        done = closed_at.get(write.stream)
        acked_data = not write.close and write.outcome is Outcome.ACK
        if done is not None and acked_data and write.invoked > done:
            report.add("closure", f"{write.payload} acknowledged after {write.stream} closed")


def _reads(report: Report, history: History, histories: _Histories) -> None:
    for read in history.reads:
        expected = tuple(
            r.payload
            for r in histories.of(read.stream)
            if r.payload is not None and read.start <= r.offset < read.next_offset
        )
        if expected != read.payloads:
            report.add(
                "stale_reads",
                f"{read.kind} of {read.stream} [{read.start}, {read.next_offset}) served "
                f"{list(read.payloads)[:4]}…, the log holds {list(expected)[:4]}…",
            )


def _views(
    report: Report,
    views: Mapping[str, Mapping[str, View]],
    fresh: str,
    histories: _Histories,
) -> None:
    reference = views[fresh]
    for stream, view in reference.items():
        if view.status == 200:
            start = view.snapshot_offset or 0
            logged = tuple(
                r.payload
                for r in histories.of(stream)
                if r.payload is not None and r.offset >= start
            )
            if view.payloads != logged:
                report.add("divergent", f"{fresh} serves {stream} unlike the log")
    for instance, seen in views.items():
        for stream, view in seen.items():
            if instance != fresh and view != reference.get(stream):
                report.add(
                    "divergent", f"{instance} {stream}: {view} vs fresh {reference.get(stream)}"
                )


def _snapshots(report: Report, history: History, views: Mapping[str, View]) -> None:
    by_stream: dict[str, list[tuple[int, str, Outcome]]] = defaultdict(list)
    for attempt in history.publishes:
        by_stream[attempt.stream].append((attempt.offset, attempt.blob, attempt.outcome))
    for stream, attempts in by_stream.items():
        view = views.get(stream)
        acked = [offset for offset, _, outcome in attempts if outcome is Outcome.ACK]
        if view is None or view.status != 200:
            if acked:
                report.add("snapshots", f"{stream}: snapshots acknowledged, stream not served")
            continue
        if acked and (view.snapshot_offset is None or view.snapshot_offset < max(acked)):
            report.add(
                "snapshots",
                f"{stream}: snapshot at {view.snapshot_offset}, one at {max(acked)} acknowledged",
            )
        if view.snapshot_offset is None:
            continue
        landed = {
            (o, blob) for o, blob, outcome in attempts if outcome not in _SAID_NOTHING_WRITTEN
        }
        if (view.snapshot_offset, view.snapshot) not in landed:
            report.add(
                "snapshots",
                f"{stream}: snapshot {view.snapshot!r} at {view.snapshot_offset}: no publish "
                "that could have landed",
            )


def _refused_below(report: Report, views: Mapping[str, Mapping[str, View]]) -> None:
    """Every instance (after the convergence allowed) refuses a read below a snapshot."""
    for instance, seen in views.items():
        for stream, view in seen.items():
            if view.snapshot_offset is not None and view.below != 410:
                report.add(
                    "snapshots", f"{instance} {stream}: a read from -1 answered {view.below}"
                )


# A 4xx, or a 5xx (which says nothing was written): such a publish is never visible.
_SAID_NOTHING_WRITTEN = (Outcome.REJECTED, Outcome.FAILED)


def _retention(report: Report, history: History) -> None:
    retained: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for attempt in history.publishes:
        if attempt.outcome is Outcome.ACK:
            retained[attempt.stream].append((attempt.completed, attempt.offset))
    for read in history.reads:
        if read.invoked is None:
            continue
        points = [o for done, o in retained.get(read.stream, []) if done + LAG_S < read.invoked]
        if points and read.start < max(points):
            report.add(
                "retention",
                f"{read.kind} of {read.stream} from {read.start} served after a snapshot at "
                f"{max(points)} was acknowledged",
            )


def _forks(report: Report, forks: list[Fork], views: Mapping[str, View]) -> None:
    for fork in forks:
        if (
            fork.outcome is Outcome.ACK
            and views.get(fork.stream, View(0, None, False, ())).status != 200
        ):
            report.add("forks", f"{fork.stream}: fork of {fork.source} acknowledged, not served")


def longest_unavailable(writes: list[Write]) -> float:
    """The longest time between two acknowledged writes while writes were being tried."""
    if not writes:
        return 0.0
    acks = sorted(w.completed for w in writes if w.outcome is Outcome.ACK)
    start, end = min(w.invoked for w in writes), max(w.completed for w in writes)
    marks = [start, *acks, end]
    return max(b - a for a, b in itertools.pairwise(marks))
