"""The load's reading of a `/bootstrap` answer, against the server's own framing of one."""

from __future__ import annotations

from adapter.http.bootstrap import closing, part_head
from tests.faults.history import Bootstrap, Outcome
from tests.faults.load import Answer, bootstrap_of, multipart
from topology.wire import encode_token

BOUNDARY = "dk-bootstrap-0123"


def framed(snapshot: bytes, messages: list[bytes]) -> bytes:
    body = part_head(BOUNDARY, "application/x-state", first=True) + snapshot
    body += b"".join(part_head(BOUNDARY, "application/json") + m for m in messages)
    return body + closing(BOUNDARY)


def answer(body: bytes, snapshot: str) -> Answer:
    headers = {
        "Content-Type": f"multipart/mixed; boundary={BOUNDARY}",
        "Stream-Snapshot-Offset": snapshot,
        "Stream-Next-Offset": encode_token(9),
    }
    return Answer(Outcome.ACK, 200, headers, body)


def test_the_parts_of_a_whole_bootstrap_are_read() -> None:
    body = framed(b"blob.1", [b'{"p":"a"}', b'[{"p":"b"},{"p":"c"}]'])
    assert multipart(body, BOUNDARY) == [b"blob.1", b'{"p":"a"}', b'[{"p":"b"},{"p":"c"}]']
    found = bootstrap_of("s", answer(body, encode_token(4)), 1.0, 2.0)
    assert found == Bootstrap("s", 4, "blob.1", 9, ("a", "b", "c"), 1.0, 2.0)


def test_a_bootstrap_without_a_snapshot_has_an_empty_first_part() -> None:
    body = framed(b"", [b'{"p":"a"}'])
    found = bootstrap_of("s", answer(body, "-1"), 1.0, 2.0)
    assert found == Bootstrap("s", None, None, 9, ("a",), 1.0, 2.0)


def test_a_bootstrap_cut_short_is_not_an_answer() -> None:
    body = framed(b"blob.1", [b'{"p":"a"}', b'{"p":"b"}'])
    for cut in (body[:-3], body[: body.index(b'{"p":"b"}')]):
        assert multipart(cut, BOUNDARY) is None
        assert bootstrap_of("s", answer(cut, encode_token(4)), 1.0, 2.0) is None
