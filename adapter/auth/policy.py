"""The access decision: may this caller (or nobody) do this operation on this bucket?

Pure and exhaustive, so it is tested as a table. Verifying the token comes before it; the
HTTP edge turns the verdict into 401, 403 or (concealing) 404.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from adapter.auth.principals import Principal
from adapter.auth.scopes import Operation, matches


@dataclass(frozen=True)
class Need:
    """What a request does: an operation on a bucket, or (None) nothing beyond being known."""

    operation: Operation | None
    bucket_id: str | None = None
    or_else: Operation | None = None  # another operation whose scope also lets it in


class Verdict(enum.Enum):
    ALLOWED = "allowed"
    UNAUTHENTICATED = "unauthenticated"  # no token, and the need is not public
    INSUFFICIENT_SCOPE = "insufficient_scope"  # a valid token without the scope


@dataclass(frozen=True)
class Policy:
    public_read: tuple[str, ...] = ()  # bucket patterns anyone may read

    def decide(self, principal: Principal | None, need: Need) -> Verdict:
        if self._public(need):
            return Verdict.ALLOWED
        if principal is None:
            return Verdict.UNAUTHENTICATED
        if need.operation is None or need.bucket_id is None:
            return Verdict.ALLOWED
        if principal.may(need.operation, need.bucket_id):
            return Verdict.ALLOWED
        if need.or_else is not None and principal.may(need.or_else, need.bucket_id):
            return Verdict.ALLOWED
        return Verdict.INSUFFICIENT_SCOPE

    def readable_by_anyone(self, bucket_id: str) -> bool:
        """Whether `bucket_id` is public-read: its reads answer the same to every caller."""
        return any(matches(pattern, bucket_id) for pattern in self.public_read)

    def _public(self, need: Need) -> bool:
        return (
            need.operation is Operation.READ
            and need.bucket_id is not None
            and self.readable_by_anyone(need.bucket_id)
        )
