"""The format level this process writes its state records in (`topology/internal_records.py`:
`LEVELS`), as Kafka gates features on `metadata.version`.

A version reads every format up to its newest and can write the previous release's. It keeps
writing the previous level until the newest is in force, so the instances of the previous
release still running beside it during a rolling upgrade never meet a record they cannot read
(they would stop). The newest level is in force once the meta topic says so: a format-level
record written by `durable-kafka upgrade finalize` (which checks that every member of the
owners' group says it reads it), or any record already written in a newest-level format. A
deployment that has no state records yet, and no member that predates levels, starts at the
newest level. The level only moves forward: once a newest-level record may be in the log, no
instance writes the previous level again.

One gate per process: the catalog raises it as it applies the meta topic, encoding reads it.
"""

from __future__ import annotations

import json
from typing import Final

from topology.group_members import READS_MARK
from topology.internal_records import NEWEST_LEVEL, PREVIOUS_LEVEL, RecordKind, level_of


def client_id(url: str) -> str:
    """The owners' consumer `client.id`: the advertised URL, then the newest level read."""
    return f"{url}{READS_MARK}{NEWEST_LEVEL}"


def member_reads(client: str) -> int:
    """The newest format level a member reads, from its `client.id`."""
    _, mark, level = client.partition(READS_MARK)
    return int(level) if mark and level.isdigit() else PREVIOUS_LEVEL


def level_record(level: int) -> bytes:
    """The value of the format-level record: a JSON object (see `FORMAT_LEVEL_KEY`)."""
    return json.dumps({"level": level}).encode()


def level_of_record(value: bytes) -> int:
    document = json.loads(value)
    level = document.get("level") if isinstance(document, dict) else None
    if not isinstance(level, int):
        raise ValueError("the format-level record holds no level")
    return level


class FormatGate:
    def __init__(self) -> None:
        # Until the start decides (`settle`), write the newest: in-process tools and tests
        # that never replay a deployment write what they read.
        self.level = NEWEST_LEVEL
        self.known = 0  # the highest level the meta topic showed in force (0: none)
        self.settled = False

    def saw(self, kind: RecordKind, value: bytes) -> None:
        """A record of the meta topic, as applied from the log."""
        self._raise(level_of(kind, value))

    def saw_level(self, level: int) -> None:
        """The format-level record (or the level a catalog file remembers)."""
        self._raise(level)

    def _raise(self, level: int) -> None:
        self.known = max(self.known, level)
        if self.settled:
            self.level = max(self.level, self.known)

    def settle(self, fresh: bool) -> int:
        """Decide the level at start, once the meta topic is replayed: the newest for a fresh
        deployment (`fresh`: nothing in the meta topic, no member predating levels), else what
        the log shows in force, the previous level at least."""
        self.level = NEWEST_LEVEL if fresh and not self.known else max(self.known, PREVIOUS_LEVEL)
        self.known = max(self.known, self.level if fresh else 0)
        self.settled = True
        return self.level


GATE: Final = FormatGate()
