"""Readiness: named checks, each with a `detail` for people and JSON fields for programs.

Ready means this instance can answer its share of requests: every check has held once since
start (it reached Kafka and S3, verified its topics, replayed its state, joined the owners'
group), and its `gates` hold now (the catalog is loaded, it is not stopping). A dependency
that goes down later is reported in its check (in `/readyz` and `/metrics`) but does not make
the instance unready: every instance sees the same outage, and taking them all out of a load
balancer would refuse the reads of hot data and (without S3) the writes they still answer.
Of the checks, only `catalog` gates requests (`app.readiness_gate`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# The keys every check reports; a check's own fields sit beside them and may not reuse them.
RESERVED = frozenset({"ok", "detail", "since_ms"})


@dataclass(frozen=True)
class Check:
    """One check's state: `fields` are for programs, `detail` says the same for people."""

    ok: bool = False
    detail: str = "not checked yet"
    fields: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    since_ms: int = field(default_factory=lambda: int(time.time() * 1000))


class Readiness:
    """Named checks, each flipped by the worker that owns it; ready when all hold."""

    def __init__(self, names: list[str], gates: frozenset[str] | None = None) -> None:
        self._checks = {name: Check() for name in names}
        self._gates = frozenset(names) if gates is None else gates
        self._held: set[str] = set()  # the checks that have held once since start

    def set(self, name: str, ok: bool, detail: str, /, **fields: object) -> None:
        """Record a check's state; `since_ms` moves only when something in it changed.

        `fields` must be JSON values: `/readyz` reports them beside `ok` and `detail`.
        """
        if clash := RESERVED & fields.keys():
            raise ValueError(f"check fields may not be named {sorted(clash)}")
        current = self._checks[name]
        if ok:
            self._held.add(name)
        if (current.ok, current.detail, current.fields) != (ok, detail, fields):
            self._checks[name] = Check(ok, detail, MappingProxyType(dict(fields)))

    def since(self, name: str) -> int:
        return self._checks[name].since_ms

    def is_ok(self, name: str) -> bool:
        return self._checks[name].ok

    @property
    def ready(self) -> bool:
        """Every check held once, and every gate holds now."""
        return not self.waiting()

    def waiting(self) -> list[str]:
        """What keeps this instance unready: gates failing now, checks never held."""
        return [
            name
            for name, check in self._checks.items()
            if name not in self._held or (name in self._gates and not check.ok)
        ]

    def failing(self) -> list[str]:
        """Every check that does not hold now, ready or not."""
        return [name for name, check in self._checks.items() if not check.ok]

    def states(self) -> dict[str, bool]:
        return {name: check.ok for name, check in self._checks.items()}

    def report(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "failing": self.failing(),
            "checks": {name: _entry(check) for name, check in self._checks.items()},
        }


def _entry(check: Check) -> dict[str, object]:
    return {"ok": check.ok, "detail": check.detail, "since_ms": check.since_ms, **check.fields}
