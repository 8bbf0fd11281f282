"""Readiness: named checks, each with a `detail` for people and JSON fields for programs.

`/readyz` answers 200 only when every check holds; of them, only `catalog` gates requests
(`app.readiness_gate`).
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

    def __init__(self, names: list[str]) -> None:
        self._checks = {name: Check() for name in names}

    def set(self, name: str, ok: bool, detail: str, /, **fields: object) -> None:
        """Record a check's state; `since_ms` moves only when something in it changed.

        `fields` must be JSON values: `/readyz` reports them beside `ok` and `detail`.
        """
        if clash := RESERVED & fields.keys():
            raise ValueError(f"check fields may not be named {sorted(clash)}")
        current = self._checks[name]
        if (current.ok, current.detail, current.fields) != (ok, detail, fields):
            self._checks[name] = Check(ok, detail, MappingProxyType(dict(fields)))

    def since(self, name: str) -> int:
        return self._checks[name].since_ms

    def is_ok(self, name: str) -> bool:
        return self._checks[name].ok

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self._checks.values())

    def failing(self) -> list[str]:
        return [name for name, check in self._checks.items() if not check.ok]

    def report(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "checks": {name: _entry(check) for name, check in self._checks.items()},
        }


def _entry(check: Check) -> dict[str, object]:
    return {"ok": check.ok, "detail": check.detail, "since_ms": check.since_ms, **check.fields}
