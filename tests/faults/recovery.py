"""Whether a scenario exercised the recovery of a write slot's new owner: the slot takeovers its
instances logged after the fault (`adapter/state/slot_takeover.py`: `write slot K: N streams
carried forward over R records (C changed) … P of Q partitions covered`), and the idempotent
producers' retries answered as duplicates after it. Pure: the runner hands in the logs' lines
and the history.

A takeover that changed streams (C > 0) found appends that no checkpoint had written: its
streams' tails and producer states came from the data log alone. A retry answered 204
(duplicate) after an attempt of unknown outcome was recognised by whoever answered it, which
after a takeover is the new owner, from the producer state it carried forward.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tests.faults.history import Outcome, Write

_TAKEOVER = re.compile(
    r"write slot (\d+): (\d+) streams carried forward over (\d+) records \((\d+) changed\)"
)
_COVERED = re.compile(r"(\d+) of \d+ partitions covered")
UNKNOWN = (Outcome.TIMEOUT, Outcome.LOST)  # the client cannot tell whether it landed
DUPLICATE = 204  # a producer's append already written (PROTOCOL §5.2.1)


@dataclass(frozen=True)
class Takeover:
    """One slot taken over: its streams, the records read after their state, those changed."""

    slot: int
    streams: int
    records: int
    changed: int
    covered: int = 0  # partitions whose scan started at their covered offset


@dataclass(frozen=True)
class Recovery:
    """What the recovery path did after a fault."""

    takeovers: int = 0  # takeovers that changed streams
    streams_changed: int = 0
    records_carried: int = 0  # read by every takeover, changing or not
    retried_duplicates: int = 0
    covered: int = 0  # takeovers that started a partition's scan at its covered offset

    def counts(self) -> dict[str, int]:
        return {
            "takeovers": self.takeovers,
            "streams_changed": self.streams_changed,
            "records_carried": self.records_carried,
            "retried_duplicates": self.retried_duplicates,
            "covered": self.covered,
        }


def recovery(lines: Iterable[str], writes: list[Write], since: float) -> Recovery:
    """From the instances' log lines written since the fault and the history's writes
    (`since`: when the fault began, on the history's clock)."""
    found = takeovers(lines)
    return Recovery(
        takeovers=sum(t.changed > 0 for t in found),
        streams_changed=sum(t.changed for t in found),
        records_carried=sum(t.records for t in found),
        retried_duplicates=retried_duplicates(writes, since),
        covered=sum(t.covered > 0 for t in found),
    )


def takeovers(lines: Iterable[str]) -> list[Takeover]:
    """Every takeover the lines log (JSON lines, or text ones)."""
    found = []
    for line in lines:
        message = _message(line)
        match = _TAKEOVER.search(message)
        if match is not None:
            covered = _COVERED.search(message)
            partitions = int(covered.group(1)) if covered is not None else 0
            slot, streams, records, changed = map(int, match.groups())
            found.append(Takeover(slot, streams, records, changed, partitions))
    return found


def _message(line: str) -> str:
    """A JSON line's `message`, else the line itself."""
    try:
        parsed = json.loads(line)
    except ValueError:
        return line
    return str(parsed.get("message", "")) if isinstance(parsed, dict) else line


def retried_duplicates(writes: list[Write], since: float) -> int:
    """Producer appends retried after an attempt of unknown outcome and answered as a
    duplicate, that answer sent at or after `since`."""
    unknown: set[str] = set()
    counted: set[str] = set()
    for write in sorted(writes, key=lambda w: w.invoked):
        if write.producer is None or write.payload is None:
            continue
        if write.outcome in UNKNOWN:
            unknown.add(write.payload)
        elif write.status == DUPLICATE and write.payload in unknown and write.invoked >= since:
            counted.add(write.payload)
    return len(counted)


def in_flight(writes: list[Write], at: float) -> set[str]:
    """The streams with an append sent before `at` and answered after it."""
    return {w.stream for w in writes if w.invoked < at < w.completed}
