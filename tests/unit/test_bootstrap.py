"""The bootstrap's multipart framing, read back by Python's standard `email` parser."""

from __future__ import annotations

import email
from email.message import Message

from adapter.http.bootstrap import closing, new_boundary, part_head

AWKWARD = [b"", b"plain", b"\r\n", b"line\r\nbreaks\n", bytes(range(256)), b"--dk-bootstrap-x"]


def _frame(boundary: str, parts: list[tuple[str, bytes]]) -> bytes:
    body = b""
    for index, (content_type, payload) in enumerate(parts):
        body += part_head(boundary, content_type, first=index == 0) + payload
    return body + closing(boundary)


def _parse(boundary: str, body: bytes) -> list[tuple[str, bytes]]:
    head = f"Content-Type: multipart/mixed; boundary={boundary}\r\n\r\n".encode()
    message = email.message_from_bytes(head + body)
    assert message.is_multipart()
    parts: list[Message] = list(message.get_payload())  # type: ignore[arg-type]
    return [(p.get_content_type(), p.get_payload(decode=True) or b"") for p in parts]  # type: ignore[misc]


def test_every_part_reads_back_exactly() -> None:
    boundary = new_boundary()
    parts = [("application/octet-stream", b"")] + [("text/plain", p) for p in AWKWARD]
    assert _parse(boundary, _frame(boundary, parts)) == parts


def test_boundaries_are_fresh_tokens() -> None:
    assert new_boundary() != new_boundary()
    assert len(new_boundary()) <= 70  # RFC 2046's limit
