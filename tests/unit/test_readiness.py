"""Readiness: ready only when every named check holds."""

from __future__ import annotations

from adapter.readiness import Readiness


def test_ready_only_when_all_checks_pass() -> None:
    readiness = Readiness(["kafka", "topics"])
    assert not readiness.ready
    readiness.set("kafka", True, "ok")
    assert not readiness.ready
    assert readiness.failing() == ["topics"]
    readiness.set("topics", True, "ok")
    assert readiness.ready
    readiness.set("kafka", False, "down")
    report = readiness.report()
    assert report["ready"] is False
    assert report["checks"] == {
        "kafka": {"ok": False, "detail": "down", "since_ms": readiness.since("kafka")},
        "topics": {"ok": True, "detail": "ok", "since_ms": readiness.since("topics")},
    }


def test_unchanged_state_keeps_its_timestamp() -> None:
    readiness = Readiness(["kafka"])
    readiness.set("kafka", True, "ok")
    first = readiness.since("kafka")
    readiness.set("kafka", True, "ok")
    assert readiness.since("kafka") == first
