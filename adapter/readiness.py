"""Readiness: the adapter serves only once every dependency has been checked."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Check:
    ok: bool = False
    detail: str = "not checked yet"
    since_ms: int = field(default_factory=lambda: int(time.time() * 1000))


class Readiness:
    """Named checks, each flipped by the worker that owns it; ready when all hold."""

    def __init__(self, names: list[str]) -> None:
        self._checks = {name: Check() for name in names}

    def set(self, name: str, ok: bool, detail: str) -> None:
        current = self._checks[name]
        if current.ok != ok or current.detail != detail:
            self._checks[name] = Check(ok, detail)

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
            "checks": {
                name: {"ok": c.ok, "detail": c.detail, "since_ms": c.since_ms}
                for name, c in self._checks.items()
            },
        }
