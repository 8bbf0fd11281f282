"""The access decision as a table: caller, operation, bucket and public buckets."""

from __future__ import annotations

import pytest

from adapter.auth.policy import Need, Policy, Verdict
from adapter.auth.principals import Principal
from adapter.auth.scopes import Operation, parse_scopes

READER = Principal("r", parse_scopes(["read:logs"]), None)
TENANT = Principal("t", parse_scopes(["read:t-*", "append:t-*", "admin:t-*"]), None)
ADMIN = Principal("d", parse_scopes(["admin:logs"]), None)
R, A, D = Operation.READ, Operation.APPEND, Operation.ADMIN
OK, NO_TOKEN, SCOPE = Verdict.ALLOWED, Verdict.UNAUTHENTICATED, Verdict.INSUFFICIENT_SCOPE


@pytest.mark.parametrize(
    ("principal", "need", "verdict"),
    [
        (None, Need(R, "logs"), NO_TOKEN),
        (None, Need(None), NO_TOKEN),
        (READER, Need(None), OK),
        (READER, Need(R, "logs"), OK),
        (READER, Need(A, "logs"), SCOPE),
        (READER, Need(D, "logs"), SCOPE),
        (READER, Need(R, "logs2"), SCOPE),
        (TENANT, Need(A, "t-1"), OK),
        (TENANT, Need(D, "t-"), OK),
        (TENANT, Need(R, "u-1"), SCOPE),
        (None, Need(R, "pub-1"), OK),
        (None, Need(A, "pub-1"), NO_TOKEN),
        (READER, Need(A, "pub-1"), SCOPE),
        (READER, Need(R, "pub-1"), OK),
        (ADMIN, Need(A, "logs"), SCOPE),
        (ADMIN, Need(A, "logs", or_else=D), OK),  # a fence: append or admin
        (TENANT, Need(A, "t-1", or_else=D), OK),
        (READER, Need(A, "logs", or_else=D), SCOPE),
    ],
)
def test_decide(principal: Principal | None, need: Need, verdict: Verdict) -> None:
    assert Policy(("pub-*",)).decide(principal, need) is verdict


def test_nothing_is_public_by_default() -> None:
    assert Policy().decide(None, Need(R, "pub-1")) is NO_TOKEN
