"""How the tier worker cuts a scanned range into per-stream chunks."""

from __future__ import annotations

from adapter.log.scanner import Scanned
from adapter.service.tiering import _grouped
from adapter.tier.chunks import ColdMessage


def _record(offset: int, key: bytes, value: bytes = b"v", control: bool = False) -> Scanned:
    return Scanned(offset, key, value, "text/plain", offset, control)


def test_data_records_are_grouped_by_stream_and_control_records_left_out() -> None:
    records = [
        _record(0, b"a", b"", control=True),
        _record(1, b"a", b"1"),
        _record(2, b"b", b"2"),
        _record(4, b"a", b"3"),
        _record(5, b"\xff", b"not a stream"),
        _record(6, b"", b"no key"),
    ]
    end, groups = _grouped(records, 9, max_streams=10)
    assert end == 9
    assert groups == {
        "a": [ColdMessage(1, "text/plain", b"1", 1), ColdMessage(4, "text/plain", b"3", 4)],
        "b": [ColdMessage(2, "text/plain", b"2", 2)],
    }


def test_a_range_ends_before_a_stream_too_many() -> None:
    records = [_record(1, b"a"), _record(2, b"b"), _record(3, b"a"), _record(5, b"c")]
    end, groups = _grouped(records, 9, max_streams=2)
    assert end == 5
    assert set(groups) == {"a", "b"}
