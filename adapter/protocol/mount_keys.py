"""A mounted topic's record keys as stream ids.

Stream id = the key decoded as UTF-8 when that is a valid stream id (`identifiers.py`) and does
not start with `~`. Any other key is addressed as `~` + its bytes in unpadded base64url
(RFC 4648 §5), which is always a valid id: `~` cannot start a plain id, so the encoding is
reversible and never collides with one. A key whose encoded id is over the stream id length
limit is not addressable (counted, like null keys). Read positions of its records:
`topology/mount_positions.py`.
"""

from __future__ import annotations

import base64
import binascii
import sys
from typing import Final

from adapter.protocol.errors import ProtocolError
from adapter.protocol.headers import normalize_content_type
from adapter.protocol.identifiers import validate_stream_id

ESCAPE: Final = "~"


def stream_id_of(bucket_id: str, key: bytes) -> str | None:
    """The stream id addressing records keyed `key`, or None if no id can."""
    try:
        plain = key.decode()
    except UnicodeDecodeError:
        plain = None
    if plain is not None and not plain.startswith(ESCAPE) and _valid(bucket_id, plain):
        return plain
    encoded = ESCAPE + base64.urlsafe_b64encode(key).decode().rstrip("=")
    return encoded if _valid(bucket_id, encoded) else None


def key_of(stream_id: str) -> bytes | None:
    """The record key a stream id addresses (None: an `~` id that is not base64url)."""
    if not stream_id.startswith(ESCAPE):
        return stream_id.encode()
    body = stream_id[1:]
    try:
        key = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    # Only the canonical spelling names the key: another would be a second id for it.
    return key if ESCAPE + base64.urlsafe_b64encode(key).decode().rstrip("=") == stream_id else None


def _valid(bucket_id: str, stream_id: str) -> bool:
    try:
        validate_stream_id(bucket_id, stream_id)
    except ProtocolError:
        return False
    return True


def media_type(raw: bytes) -> str | None:
    """A content-type header's value as a media type (one string shared by every key that
    has it), or None when it is not one: the mount's default applies then."""
    try:
        normalized = normalize_content_type(raw.decode("utf-8", "replace"))
    except ProtocolError:
        return None
    return sys.intern(normalized) if normalized is not None else None
