"""Readiness: ready only when every named check holds; each check reports its fields."""

from __future__ import annotations

import pytest

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


def test_fields_are_reported_beside_the_detail() -> None:
    readiness = Readiness(["ownership"])
    readiness.set("ownership", True, "owns 2/4 slots: 1,3", owned_slots=[1, 3], slot_count=4)
    assert readiness.report()["checks"] == {
        "ownership": {
            "ok": True,
            "detail": "owns 2/4 slots: 1,3",
            "since_ms": readiness.since("ownership"),
            "owned_slots": [1, 3],
            "slot_count": 4,
        }
    }


def test_a_field_may_not_hide_ok_detail_or_since() -> None:
    readiness = Readiness(["kafka"])
    with pytest.raises(ValueError, match="since_ms"):
        readiness.set("kafka", True, "ok", since_ms=0)


def test_unchanged_state_keeps_its_timestamp() -> None:
    readiness = Readiness(["kafka"])
    readiness.set("kafka", True, "ok", tries=[1])
    first = readiness.since("kafka")
    readiness.set("kafka", True, "ok", tries=[1])
    assert readiness.since("kafka") == first


def test_a_dependency_lost_after_start_is_reported_but_keeps_the_instance_ready() -> None:
    readiness = Readiness(["kafka", "catalog", "serving"], frozenset({"catalog", "serving"}))
    readiness.set("catalog", True, "replayed")
    readiness.set("serving", True, "accepting")
    assert readiness.waiting() == ["kafka"]  # never reached: not ready yet
    readiness.set("kafka", True, "ok")
    assert readiness.ready
    readiness.set("kafka", False, "down")
    assert readiness.ready
    assert readiness.report()["failing"] == ["kafka"]
    readiness.set("serving", False, "stopping")
    assert not readiness.ready
    assert readiness.waiting() == ["serving"]
