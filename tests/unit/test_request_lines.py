"""The request log's writer: its lines are `logging`'s lines, and a full queue drops successes
first, counting them, never an error line while there is room for it."""

from __future__ import annotations

import io
import logging
import threading

import pytest

from adapter import log_output
from adapter.request_lines import ERROR_LIMIT_FACTOR, LOGGER, LineFormat, RequestLines

FIELDS: dict[str, object] = {
    "request_id": "0123456789abcdef0000000000000001",
    "method": "POST",
    "route": "/{bucket}/{stream}",
    "status": 204,
    "duration_ms": 1.25,
    "bytes_in": 256,
    "bytes_out": 0,
    "remote": "127.0.0.1",
    "kafka_topic": "t.bucket.b",
    "kafka_offset": 7,
}


def _logged(log_format: str, fields: dict[str, object]) -> tuple[float, str]:
    """When `logging` made the line and the line its formatter wrote."""
    record = logging.getLogger(LOGGER).makeRecord(
        LOGGER,
        logging.INFO,
        __file__,
        1,
        "%s %s %d",
        ("POST", fields["route"], 204),
        None,
        extra=fields,
    )
    return record.created, log_output.formatter(log_format).format(record)


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_line_is_the_line_logging_writes(log_format: str) -> None:
    created, expected = _logged(log_format, FIELDS)
    assert LineFormat(json_lines=log_format == "json")(created, FIELDS) == expected


def test_the_time_of_a_second_is_reused_and_its_milliseconds_are_not() -> None:
    line = LineFormat(json_lines=False)
    assert line.asctime(1_000_000.5).endswith(",500")
    assert line.asctime(1_000_000.0625).endswith(",062")  # truncated, as logging does
    assert line.asctime(1_000_000.5)[:-4] == line.asctime(1_000_000.999)[:-4]


def _lines(limit: int) -> tuple[RequestLines, io.StringIO]:
    stream = io.StringIO()
    # The writer thread waits an hour: what is queued is written only by `close`.
    return RequestLines(stream, threading.RLock(), LineFormat(True), limit, 3600), stream


def test_lines_are_written_in_order_at_once() -> None:
    lines, stream = _lines(limit=10)
    for offset in range(3):
        lines.put(FIELDS | {"kafka_offset": offset}, error=False)
    assert stream.getvalue() == ""  # the loop only queued them
    lines.close()
    written = stream.getvalue().splitlines()
    assert [line.count('"kafka_offset": ') for line in written] == [1, 1, 1]
    assert [line.rsplit(" ", 1)[-1] for line in written] == ["0}", "1}", "2}"]


def test_a_full_queue_drops_successes_and_counts_them_but_keeps_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines, stream = _lines(limit=2)
    for _ in range(5):
        lines.put(FIELDS, error=False)
    assert lines.dropped == 3
    for _ in range(2 * ERROR_LIMIT_FACTOR):  # errors fill up to the factor, then drop too
        lines.put(FIELDS | {"status": 503}, error=True)
    assert lines.dropped == 3 + 2  # 6 errors more fit (2 + 6 = 2 x the factor), 2 did not
    with caplog.at_level(logging.WARNING):
        lines.close()
    written = stream.getvalue().splitlines()
    assert len(written) == 2 * ERROR_LIMIT_FACTOR
    assert sum('"status": 503' in line for line in written) == 2 * ERROR_LIMIT_FACTOR - 2
    dropped = [record for record in caplog.records if record.name == "adapter.request_lines"]
    assert [getattr(record, "dropped", None) for record in dropped] == [5]
    assert lines.dropped == 0  # told once
