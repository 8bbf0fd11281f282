"""A bucket's configuration as clients send and see it: `{"retention": {"max_age_ms": N}}`.

Sent in the body of `PUT /{bucket}` (at creation) or of `PUT /{bucket}/config` (a change: the
body is the whole configuration, so what it leaves out is reset), and shown by `GET /{bucket}`.
`max_age_ms` is age retention: the bucket's messages older than that are trimmed from its
streams by a background pass (`adapter/service/age_retention.py`); `null`, or no `retention`,
keeps them until trimmed or replaced by a snapshot. Any other body is refused with
`invalid_retention` (not JSON at all: `invalid_json`).

The bucket's ETag names its incarnation and the version of its configuration, so every change
gives a new one, even back to an earlier value: `If-Match` with it makes a change conditional,
and of two writers sending the ETag they both read, exactly one wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from adapter.protocol.caching import if_match_matches
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta

# Below a second, the background pass (every `age_retention_interval_ms`) could not keep up.
MIN_MAX_AGE_MS: Final = 1000
MAX_MAX_AGE_MS: Final = 2**53 - 1  # the largest integer every JSON client reads exactly


@dataclass(frozen=True)
class BucketConfig:
    max_age_ms: int | None = None


def parse_config(document: Any) -> BucketConfig:
    """The configuration a decoded JSON body gives: an object with `retention` at most."""
    if not isinstance(document, dict) or not set(document) <= {"retention"}:
        raise _invalid('a bucket configuration is {"retention": {"max_age_ms": <ms>}}')
    retention = document.get("retention")
    if retention is None:
        return BucketConfig()
    if not isinstance(retention, dict) or not set(retention) <= {"max_age_ms"}:
        raise _invalid('"retention" must be {"max_age_ms": <ms>} or null')
    return BucketConfig(_max_age(retention.get("max_age_ms")))


def _max_age(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid('"max_age_ms" must be an integer number of milliseconds or null')
    if not MIN_MAX_AGE_MS <= value <= MAX_MAX_AGE_MS:
        raise _invalid(f'"max_age_ms" must be in {MIN_MAX_AGE_MS}..{MAX_MAX_AGE_MS}')
    return value


def _invalid(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_RETENTION, message)


def config_of(meta: BucketMeta) -> BucketConfig:
    return BucketConfig(meta.retention_max_age_ms)


def rendered(config: BucketConfig) -> dict[str, Any]:
    """The configuration as `GET /{bucket}` and `PUT /{bucket}/config` show it."""
    return {"retention": {"max_age_ms": config.max_age_ms}}


def bucket_etag(meta: BucketMeta) -> str:
    """A strong tag of this incarnation of the bucket and this version of its configuration."""
    return f'"{meta.created_at_ms}.{meta.config_version}"'


def check_if_match(meta: BucketMeta, if_match: str | None) -> None:
    """412 when `If-Match` names neither `*` nor the bucket's current ETag."""
    if if_match is not None and not if_match_matches(if_match, bucket_etag(meta)):
        raise ProtocolError(
            ErrorCode.PRECONDITION_FAILED,
            f"If-Match {if_match!r} is not the bucket's ETag {bucket_etag(meta)}: read it again",
        )


def reconfigured(meta: BucketMeta, config: BucketConfig) -> BucketMeta:
    """The bucket with `config`, its version one further."""
    return BucketMeta(
        meta.bucket_id,
        meta.topic,
        meta.partitions,
        meta.created_at_ms,
        retention_max_age_ms=config.max_age_ms,
        config_version=meta.config_version + 1,
    )
