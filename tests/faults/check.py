"""The checker: a recorded history against what Kafka holds, and each instance's final view
against a fresh replay. Pure: the runner gathers the inputs, this decides.

Invariants (each breach is an anomaly, and any anomaly fails the run):
The log is what a fresh `read_committed` consumer finds in Kafka together with what the cold
tier's manifest lists (its chunks read from the object store): tiering frees Kafka's copy of
what it moved, so neither alone holds everything.

- lost: an acknowledged append (or close) is not in the log — unless its stream was deleted
  and the log no longer holds even the stream's create record while its partition's log start
  has moved: retention frees a partition's prefix that no live stream needs, so a deleted
  stream's records go; or unless its stream's visible snapshot is at or past the append's
  tail: retention frees what is below a snapshot (both counted as `freed`, not anomalies).
  A close whose stream's beginning was freed is found closed by the fresh instance instead;
- cold: a chunk the manifest lists is not in the object store, or a record of a chunk differs
  from Kafka's record at the same offset;
- duplicated: one logical append is in the log more than once;
- reordered: a producer's records are not in increasing `Producer-Seq` order;
- phantom: data whose every attempt was answered 4xx (or every one 5xx) is in the log;
- closure: data after a stream's close record, or an append acknowledged after its close was;
- stale reads: what a client was served differs from the log's data records at those offsets
  (for a fork: its source's below the fork offset, then its own; below a stream's visible
  snapshot the log may have been freed, so there only the records at or past it are
  compared, as the served list's end), or it lacks an acknowledged append whose record was
  certainly in its range (below the tail the append was answered, at or past every tail
  acknowledged before the append was first sent: a rule on the history alone, which holds
  where the log was freed since), or a read said it was up to date while an append
  acknowledged `LAG_S` before it was sent lies past its end;
- bootstraps: a `/bootstrap` served other messages than the log holds after its snapshot's
  offset or lacks an acknowledged append of that range (as for reads), said it was up to
  date while missing an append acknowledged `LAG_S` before it was sent, or served a snapshot
  no publish that could have landed named;
- divergent: an instance's HEAD/GET of a stream differs (still, after up to 15 s) from a fresh
  instance's, or the fresh instance's from the log;
- snapshots: a stream's visible snapshot (on the fresh instance) is older than one whose
  publish was acknowledged, is at an offset no publish that could have landed named, or is not
  that publish's blob; or an instance does not refuse (410) a read from -1 of a stream with a
  snapshot;
- retention: a read began `LAG_S` after a publish or a trim at `o` was acknowledged (the lag
  every instance is allowed to learn a change, as for divergent views), started below `o`, and
  was served; or a stream starts (on the fresh instance) below a trim point acknowledged. Below
  a trim point, as below a snapshot, the log may have been freed (`freed`, not `lost`);
- forks: an acknowledged fork does not exist (its inherited range is checked as its reads and
  views are).

A bucket deleted and created again ends its streams' history: attempts completed before the
last delete was sent belong to the old incarnation, whose log is gone, and are counted as
`ended`; attempts sent after the new bucket was acknowledged are checked against the new log;
an append in between may be in the new log or not (an unknown outcome), and a read in between
is not checked.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tests.faults.history import (
    Bootstrap,
    ColdTier,
    Fork,
    History,
    LogRecord,
    Outcome,
    Publish,
    Trim,
    View,
    Write,
)

# How long an instance may take to learn what another acknowledged (its follower): the runner's
# CONVERGE_S, which the views are given too.
LAG_S = 15.0

KINDS = (
    "lost",
    "duplicated",
    "reordered",
    "phantom",
    "closure",
    "cold",
    "stale_reads",
    "bootstraps",
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
    # How long a plain transactional client could not commit to the busiest partition
    # (kafka_probe.py): Kafka's own share of `longest_unavailable_s`; None when not measured.
    kafka_unavailable_s: float | None = None
    freed: int = 0  # acknowledged appends of deleted streams whose records retention freed
    ended: int = 0  # attempts on a bucket's incarnation that was deleted since
    cold_records: int = 0  # records of the log read from the cold tier
    cold_reads: int = 0  # reads and bootstraps that served records the cold tier holds
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    unavailable_by_slot: dict[int, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # the fault's own measures
    # What the fault needed the load to reach and it did not (its `exercised` count stayed 0):
    # a run that never took the path it is about checks nothing of it, and fails.
    unexercised: list[str] = field(default_factory=list)

    def add(self, kind: str, detail: str) -> None:
        self.anomalies[kind].append(detail)

    def require(self, exercised: Mapping[str, int], needed: Iterable[str]) -> None:
        """Each of `needed` must have been exercised at least once."""
        self.unexercised += [name for name in needed if not exercised.get(name)]

    def count(self, kind: str) -> int:
        return len(self.anomalies[kind])

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values()) and not self.unexercised

    def line(self) -> str:
        counts = " ".join(f"{kind}={self.count(kind)}" for kind in KINDS)
        return (
            f"{self.name}: operations={self.operations} acknowledged={self.acknowledged} "
            f"{counts} freed={self.freed} ended={self.ended} cold_records={self.cold_records} "
            f"cold_reads={self.cold_reads} "
            f"longest_unavailable={self.longest_unavailable_s:.1f}s"
            f"{self._split()}"
            f"{_by_slot(self.unavailable_by_slot)}"
            + "".join(f" {key}={value}" for key, value in self.notes.items())
            + (f" unexercised={','.join(self.unexercised)}" if self.unexercised else "")
        )

    @property
    def adapter_unavailable_s(self) -> float | None:
        """The adapters' own share of the longest outage: what Kafka itself did not explain."""
        if self.kafka_unavailable_s is None:
            return None
        return max(0.0, self.longest_unavailable_s - self.kafka_unavailable_s)

    def _split(self) -> str:
        """` kafka_unavailable=… adapter_share=…`, or nothing when Kafka was not probed."""
        if self.kafka_unavailable_s is None or self.adapter_unavailable_s is None:
            return ""
        return (
            f" kafka_unavailable={self.kafka_unavailable_s:.1f}s"
            f" adapter_share={self.adapter_unavailable_s:.1f}s"
        )

    def details(self, limit: int = 5) -> str:
        found = [
            f"  {kind}: {detail}"
            for kind, details in self.anomalies.items()
            for detail in details[:limit]
        ]
        return "\n".join(found + [f"  unexercised: {name} stayed 0" for name in self.unexercised])


def _by_slot(unavailable: Mapping[int, float]) -> str:
    """` unavailable_by_slot=0:1.2s,3:0.4s`, or nothing when not measured."""
    if not unavailable:
        return ""
    return " unavailable_by_slot=" + ",".join(f"{k}:{s:.1f}s" for k, s in unavailable.items())


def check(
    name: str,
    history: History,
    log: Iterable[LogRecord],
    views: Mapping[str, Mapping[str, View]] | None = None,
    fresh: str = "",
    log_starts: Mapping[str, int] | None = None,
    cold: ColdTier | None = None,
) -> Report:
    """`log_starts`: per stream, the log start offset of its partition (absent: 0); `cold`:
    what the cold tier's manifest lists."""
    report = Report(name, history.operations)
    history = _current(report, history)
    records = _merged(report, log, cold or ColdTier())
    by_stream: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_stream[record.stream].append(record)
    report.acknowledged = sum(w.outcome is Outcome.ACK for w in history.writes)
    report.longest_unavailable_s = longest_unavailable(history.writes)
    reference = views[fresh] if views else {}
    floors = {s: floor for s, v in reference.items() if (floor := _floor(v))}
    freed = _freed_streams(history, by_stream, log_starts or {})
    _exactly_once(report, history.writes, records, freed, floors)
    _producer_order(report, records)
    _closures(report, history.writes, by_stream, reference)
    histories = _histories(by_stream, history, floors)
    tiered: dict[str, list[int]] = defaultdict(list)
    for record in (cold or ColdTier()).records:
        tiered[record.stream].append(record.offset)
    for offsets in tiered.values():
        offsets.sort()
    _reads(report, history, histories, tiered)
    _bootstraps(report, history, histories, tiered)
    _retention(report, history)
    if views:
        _views(report, views, fresh, histories)
        _snapshots(report, history, views[fresh])
        _refused_below(report, views)
        _forks(report, history.forks, views[fresh])
        _trims(report, history, views[fresh])
    return report


def _floor(view: View) -> int:
    """Where a stream's retained range starts: its visible snapshot or its trim point."""
    return max(view.snapshot_offset or 0, view.earliest or 0)


def _current(report: Report, history: History) -> History:
    """The history without what belongs to an incarnation of a bucket deleted since (counted
    as `ended`); an append sent before the last incarnation was acknowledged and answered
    after its delete was sent is of unknown outcome as far as the new log goes."""
    cuts = _incarnations(history)
    if not cuts:
        return history
    kept = History(
        lifecycle=history.lifecycle,
        publishes=history.publishes,
        trims=history.trims,
        forks=history.forks,
        bootstraps=history.bootstraps,
        buckets=history.buckets,
    )
    for write in history.writes:
        cut = _cut(cuts, write.stream)
        if cut is not None and write.completed < cut[0]:
            report.ended += 1
        elif cut is not None and write.invoked < cut[1] and write.outcome is Outcome.ACK:
            kept.writes.append(replace(write, outcome=Outcome.TIMEOUT))
        else:
            kept.writes.append(write)
    for read in history.reads:
        cut = _cut(cuts, read.stream)
        sent = read.invoked if read.invoked is not None else read.completed
        if cut is not None and sent < cut[1]:
            report.ended += 1
        else:
            kept.reads.append(read)
    return kept


def _incarnations(history: History) -> dict[str, tuple[float, float]]:
    """Per bucket deleted and created again: (when the first attempt of its last deletion was
    sent, when the create after it was answered). A deletion took effect if one of its
    attempts was answered 2xx, or 404 (a retry after one that had landed); a create, 2xx or
    409 (the same). Attempts refused otherwise (409 `bucket_not_empty`) deleted nothing."""
    cuts: dict[str, tuple[float, float]] = {}
    deleting: dict[str, float] = {}
    deleted: set[str] = set()
    for event in history.buckets:
        if event.action == "delete":
            deleting.setdefault(event.bucket, event.invoked)
            if event.outcome is Outcome.ACK or event.status == 404:
                deleted.add(event.bucket)
        elif event.outcome is Outcome.ACK or event.status == 409:
            sent = deleting.pop(event.bucket, None)
            if event.bucket in deleted and sent is not None:
                cuts[event.bucket] = (sent, event.completed)
            deleted.discard(event.bucket)
    return cuts


def _cut(cuts: Mapping[str, tuple[float, float]], stream: str) -> tuple[float, float] | None:
    """(when the last delete of the stream's bucket was sent, when it was created again)."""
    bucket, slash, _ = stream.partition("/")
    return cuts.get(bucket) if slash else None


def _merged(report: Report, log: Iterable[LogRecord], cold: ColdTier) -> list[LogRecord]:
    """Kafka's records and the cold tier's, one per offset; where both hold an offset (a range
    tiered and not freed yet) they must agree."""
    merged = {(r.stream, r.offset): r for r in log}
    for key in cold.missing:
        report.add("cold", f"chunk {key} is listed and not in the object store")
    for record in cold.records:
        report.cold_records += 1
        found = merged.setdefault((record.stream, record.offset), record)
        if (found.payload, found.producer) != (record.payload, record.producer):
            report.add("cold", f"{record.stream}@{record.offset}: chunk {record}, Kafka {found}")
    return sorted(merged.values(), key=lambda r: (r.stream, r.offset))


class _Histories:
    """Each stream's records as its reads see them: a fork's source's below the fork offset
    (recursively), then its own; and where the log may have been freed below (its visible
    snapshot's offset)."""

    def __init__(
        self,
        by_stream: Mapping[str, list[LogRecord]],
        forks: Mapping[str, Fork],
        floors: Mapping[str, int],
        tried: Mapping[str, set[str]],
    ):
        self.by_stream = by_stream
        self.forks = forks
        self.floors = floors
        self.tried = tried  # per stream, the payloads of appends not refused on every attempt
        self.bounds: dict[str, list[tuple[str, int, int]]] = {}

    def missing(self, stream: str, start: int, end: int, payloads: tuple[str, ...]) -> str | None:
        """An acknowledged append of the stream certainly in [start, end), yet not served: its
        record lies below the tail its answer gave and at or past every tail acknowledged
        before it was first sent. Needs no log, so it holds where the log was freed since."""
        served = set(payloads)
        for payload, low, tail in self.bounds.get(stream, []):
            if start <= low and tail <= end and payload not in served:
                return f"{payload} (in [{low}, {tail}))"
        return None

    def served(self, stream: str, start: int, end: int, payloads: tuple[str, ...]) -> bool:
        """Whether `payloads` are the stream's data records in [start, end): all of them, or,
        from below its floor (which the log may no longer hold), appends tried on the stream
        and then exactly its records past the floor."""
        inside = [r for r in self.of(stream) if r.payload is not None and start <= r.offset < end]
        if payloads == tuple(r.payload for r in inside):
            return True
        floor = self.floors.get(stream, 0)
        known = tuple(r.payload for r in inside if r.offset >= floor)
        below, past = payloads[: len(payloads) - len(known)], payloads[len(payloads) - len(known) :]
        tried = self.tried.get(stream, set())
        return start < floor and past == known and all(p in tried for p in below)

    def of(self, stream: str, depth: int = 0) -> list[LogRecord]:
        fork = self.forks.get(stream)
        own = self.by_stream.get(stream, [])
        if fork is None or depth > 16:
            return own
        inherited = [r for r in self.of(fork.source, depth + 1) if r.offset < fork.offset]
        return inherited + own


def _histories(
    by_stream: Mapping[str, list[LogRecord]], history: History, floors: Mapping[str, int]
) -> _Histories:
    acknowledged = {f.stream: f for f in history.forks if f.outcome is Outcome.ACK}
    tried: dict[str, set[str]] = defaultdict(set)
    for write in history.writes:
        if write.payload is not None and write.outcome not in _SAID_NOTHING_WRITTEN:
            tried[write.stream].add(write.payload)
    found = _Histories(by_stream, acknowledged, floors, tried)
    found.bounds = _bounds(history.writes)
    return found


def _bounds(writes: list[Write]) -> dict[str, list[tuple[str, int, int]]]:
    """Per stream, each acknowledged append's payload and the offsets its record lies within:
    [the highest tail acknowledged before its first attempt was sent, the tail it was
    answered)."""
    first: dict[str, float] = {}
    for write in writes:
        if write.payload is not None:
            first[write.payload] = min(first.get(write.payload, write.invoked), write.invoked)
    acks = sorted(
        (w for w in writes if w.outcome is Outcome.ACK and w.next_offset is not None),
        key=lambda w: w.completed,
    )
    by_stream: dict[str, list[Write]] = defaultdict(list)
    for write in acks:
        by_stream[write.stream].append(write)
    bounds: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for stream, done in by_stream.items():
        times = [w.completed for w in done]
        highest = list(itertools.accumulate((w.next_offset or 0 for w in done), max))
        for write in done:
            if write.payload is None or write.next_offset is None:
                continue
            before = bisect.bisect_left(times, first[write.payload])
            low = highest[before - 1] if before else 0
            bounds[stream].append((write.payload, low, write.next_offset))
    return bounds


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
    report: Report,
    writes: list[Write],
    records: list[LogRecord],
    freed: set[str],
    floors: Mapping[str, int],
) -> None:
    found = Counter(r.payload for r in records if r.payload is not None)
    attempts: dict[str, list[Write]] = defaultdict(list)
    for write in writes:
        if write.payload is not None:
            attempts[write.payload].append(write)
    for payload, tries in attempts.items():
        outcomes = {t.outcome for t in tries}
        if Outcome.ACK in outcomes and found[payload] == 0:
            if tries[0].stream in freed or _below_floor(tries, floors):
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


def _below_floor(tries: list[Write], floors: Mapping[str, int]) -> bool:
    """Whether an acknowledged attempt's tail is at or below its stream's visible snapshot."""
    floor = floors.get(tries[0].stream)
    tails = [t.next_offset for t in tries if t.outcome is Outcome.ACK and t.next_offset]
    return floor is not None and bool(tails) and min(tails) <= floor


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
    report: Report,
    writes: list[Write],
    by_stream: Mapping[str, list[LogRecord]],
    reference: Mapping[str, View],
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
            if not _closed(write.stream, by_stream.get(write.stream, []), reference):
                report.add("lost", f"{write.stream}: close acknowledged, no close record")
    for write in writes:
        done = closed_at.get(write.stream)
        acked_data = not write.close and write.outcome is Outcome.ACK
        if done is not None and acked_data and write.invoked > done:
            report.add("closure", f"{write.payload} acknowledged after {write.stream} closed")


def _closed(stream: str, records: list[LogRecord], reference: Mapping[str, View]) -> bool:
    """A close record in the log, or (when the log no longer holds the stream's create record:
    tiering or retention freed its beginning, close included) a fresh instance that says so."""
    if any(r.control == "close" for r in records):
        return True
    view = reference.get(stream)
    freed_start = not any(r.control == "create" for r in records)
    return freed_start and view is not None and view.closed


def _reads(
    report: Report, history: History, histories: _Histories, tiered: Mapping[str, list[int]]
) -> None:
    for read in history.reads:
        report.cold_reads += _touches(read.stream, read.start, read.next_offset, tiered)
        if not histories.served(read.stream, read.start, read.next_offset, read.payloads):
            expected = [
                r.payload
                for r in histories.of(read.stream)
                if r.payload is not None and read.start <= r.offset < read.next_offset
            ]
            report.add(
                "stale_reads",
                f"{read.kind} of {read.stream} [{read.start}, {read.next_offset}) served "
                f"{list(read.payloads)[:4]}…, the log holds {expected[:4]}…",
            )
        absent = histories.missing(read.stream, read.start, read.next_offset, read.payloads)
        if absent is not None:
            report.add(
                "stale_reads",
                f"{read.kind} of {read.stream} [{read.start}, {read.next_offset}) did not "
                f"serve the acknowledged {absent}",
            )
        if read.up_to_date and read.invoked is not None:
            missed = _missed(history.writes, read.stream, read.invoked, read.next_offset)
            if missed:
                report.add(
                    "stale_reads",
                    f"{read.kind} of {read.stream} up to date at {read.next_offset} without "
                    f"{missed}, acknowledged {LAG_S:.0f}s before",
                )


def _touches(stream: str, start: int, end: int, tiered: Mapping[str, list[int]]) -> bool:
    """Whether the cold tier holds a record of the stream in [start, end)."""
    offsets = tiered.get(stream, [])
    index = bisect.bisect_left(offsets, start)
    return index < len(offsets) and offsets[index] < end


def _missed(writes: list[Write], stream: str, sent: float, end: int) -> str | None:
    """An append acknowledged `LAG_S` before `sent` whose tail is past `end`, if any."""
    for write in writes:
        tail = write.next_offset if write.outcome is Outcome.ACK else None
        early = write.completed + LAG_S < sent
        if tail is not None and tail > end and write.stream == stream and early:
            return f"{write.payload} (tail {tail})"
    return None


def _bootstraps(
    report: Report, history: History, histories: _Histories, tiered: Mapping[str, list[int]]
) -> None:
    landed = {
        (p.stream, p.offset, p.blob)
        for p in history.publishes
        if p.outcome not in _SAID_NOTHING_WRITTEN
    }
    for boot in history.bootstraps:
        start = boot.snapshot_offset or 0
        report.cold_reads += _touches(boot.stream, start, boot.next_offset, tiered)
        for problem in _bootstrap_problems(boot, history, histories, landed):
            report.add("bootstraps", f"/bootstrap of {boot.stream}: {problem}")


def _bootstrap_problems(
    boot: Bootstrap,
    history: History,
    histories: _Histories,
    landed: set[tuple[str, int, str]],
) -> list[str]:
    problems = []
    start = boot.snapshot_offset or 0
    if not histories.served(boot.stream, start, boot.next_offset, boot.payloads):
        problems.append(f"[{start}, {boot.next_offset}) served {list(boot.payloads)[:4]}…")
    absent = histories.missing(boot.stream, start, boot.next_offset, boot.payloads)
    if absent is not None:
        problems.append(f"[{start}, {boot.next_offset}) did not serve the acknowledged {absent}")
    missed = _missed(history.writes, boot.stream, boot.invoked, boot.next_offset)
    if missed:
        problems.append(f"up to date at {boot.next_offset} without {missed}")
    snapshot = (boot.stream, boot.snapshot_offset, boot.snapshot)
    if boot.snapshot_offset is not None and snapshot not in landed:
        problems.append(f"snapshot {boot.snapshot!r} at {boot.snapshot_offset}: no such publish")
    return problems


def _views(
    report: Report,
    views: Mapping[str, Mapping[str, View]],
    fresh: str,
    histories: _Histories,
) -> None:
    reference = views[fresh]
    for stream, view in reference.items():
        if view.status == 200:
            start = _floor(view)
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
    moves: list[Publish | Trim] = [*history.publishes, *history.trims]
    for attempt in moves:
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


def _trims(report: Report, history: History, views: Mapping[str, View]) -> None:
    """A stream starts at or past every trim point acknowledged (a trim never moves back)."""
    acked: dict[str, int] = {}
    for attempt in history.trims:
        if attempt.outcome is Outcome.ACK:
            acked[attempt.stream] = max(acked.get(attempt.stream, 0), attempt.offset)
    for stream, offset in acked.items():
        view = views.get(stream)
        if view is not None and view.status == 200 and _floor(view) < offset:
            report.add("retention", f"{stream}: starts at {_floor(view)}, a trim at {offset} acked")


def longest_unavailable(writes: list[Write]) -> float:
    """The longest time between two acknowledged writes while writes were being tried."""
    if not writes:
        return 0.0
    acks = sorted(w.completed for w in writes if w.outcome is Outcome.ACK)
    start, end = min(w.invoked for w in writes), max(w.completed for w in writes)
    marks = [start, *acks, end]
    return max(b - a for a, b in itertools.pairwise(marks))
