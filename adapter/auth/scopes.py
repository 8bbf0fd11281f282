"""Scopes: an operation class and the buckets it covers (`read:logs`, `append:tenant-a-*`).

A scope's bucket part is a bucket id, or a prefix ending in `*` (`*` alone: every bucket).
Scopes that are not ours (`openid`, `profile`, a misspelt class) are kept out, never an error:
a token from a shared identity provider carries many.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Operation(enum.Enum):
    """What a route does to a bucket; each needs its own scope (admin does not imply read)."""

    READ = "read"  # GET/HEAD of streams and buckets, live reads, snapshots read, bootstrap
    APPEND = "append"  # POST to a stream, closure included
    ADMIN = "admin"  # bucket and stream create/delete, fork, snapshot publish/delete


@dataclass(frozen=True)
class Scope:
    operation: Operation
    pattern: str  # a bucket id, or a prefix ending in `*`

    def covers(self, operation: Operation, bucket_id: str) -> bool:
        return operation is self.operation and matches(self.pattern, bucket_id)

    def __str__(self) -> str:
        return f"{self.operation.value}:{self.pattern}"


def matches(pattern: str, bucket_id: str) -> bool:
    """A bucket id against a pattern: equal, or a prefix of it when the pattern ends in `*`."""
    if pattern.endswith("*"):
        return bucket_id.startswith(pattern[:-1])
    return bucket_id == pattern


def parse_scope(text: str) -> Scope | None:
    """`read:logs` as a Scope; None for anything that is not one of ours."""
    name, sep, pattern = text.partition(":")
    operations = {op.value: op for op in Operation}
    if not sep or name not in operations or not pattern or "*" in pattern[:-1]:
        return None
    return Scope(operations[name], pattern)


def parse_scopes(texts: Iterable[str]) -> frozenset[Scope]:
    return frozenset(scope for text in texts if (scope := parse_scope(text)) is not None)


def needed(operation: Operation, bucket_id: str) -> str:
    """The scope a refusal names (RFC 6750 `scope=`)."""
    return f"{operation.value}:{bucket_id}"
