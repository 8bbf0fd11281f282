"""Scopes: parsing our three classes and bucket patterns, ignoring everybody else's."""

from __future__ import annotations

import pytest

from adapter.auth.scopes import Operation, Scope, matches, parse_scope, parse_scopes


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("read:logs", Scope(Operation.READ, "logs")),
        ("append:tenant-a-*", Scope(Operation.APPEND, "tenant-a-*")),
        ("admin:*", Scope(Operation.ADMIN, "*")),
        ("openid", None),
        ("write:logs", None),
        ("read:", None),
        ("read:a*b", None),
        ("READ:logs", None),
    ],
)
def test_parse(text: str, scope: Scope | None) -> None:
    assert parse_scope(text) == scope


@pytest.mark.parametrize(
    ("pattern", "bucket", "expected"),
    [
        ("logs", "logs", True),
        ("logs", "logs2", False),
        ("logs*", "logs2", True),
        ("logs*", "log", False),
        ("*", "anything", True),
    ],
)
def test_patterns(pattern: str, bucket: str, expected: bool) -> None:
    assert matches(pattern, bucket) is expected


def test_a_scope_covers_only_its_own_operation() -> None:
    scope = Scope(Operation.READ, "logs")
    assert scope.covers(Operation.READ, "logs")
    assert not scope.covers(Operation.APPEND, "logs")
    assert not scope.covers(Operation.ADMIN, "logs")


def test_unknown_scopes_are_dropped() -> None:
    assert parse_scopes(["openid", "read:a", "profile"]) == {Scope(Operation.READ, "a")}
    assert str(Scope(Operation.APPEND, "b*")) == "append:b*"
