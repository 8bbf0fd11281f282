"""Every error code has exactly one HTTP status, an error one, in the edge's table."""

from __future__ import annotations

import ast
from pathlib import Path

from adapter.http.statuses import STATUSES, status_of
from adapter.protocol.errors import RETRIABLE, ErrorCode

PROTOCOL = Path(__file__).resolve().parents[2] / "adapter" / "protocol"


def test_every_code_has_an_error_status() -> None:
    assert set(STATUSES) == set(ErrorCode)
    assert all(400 <= status_of(code) < 600 for code in ErrorCode)


def test_every_code_is_sent_as_a_distinct_string() -> None:
    codes = [code.code for code in ErrorCode]
    assert len(codes) == len(set(codes))
    assert all(code.code == code.value for code in ErrorCode)


def test_retriable_codes_are_exactly_the_503s() -> None:
    """`Retry-After` and "nothing was written" go with 503, and only with it."""
    assert {code for code in ErrorCode if status_of(code) == 503} == RETRIABLE
    assert all(code.retriable == (code in RETRIABLE) for code in ErrorCode)


def test_the_protocol_rules_know_no_status() -> None:
    """No module of `adapter/protocol/` names an HTTP status of an error code."""
    for path in PROTOCOL.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert "status" not in names, path
