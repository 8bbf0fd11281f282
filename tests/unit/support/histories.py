"""Random histories of one stream's commands, drawn alike by the machine's property test
(`test_stream_machine.py`) and the driver's (`test_streams.py`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from adapter.protocol.commands import Append, CreateStream, StreamRef
from topology.wire import ProducerStamp

REF = StreamRef("bucket", "s")
TEXT = "text/plain"


def create(content_type: str | None = TEXT, body: bytes = b"", **changes: Any) -> CreateStream:
    return replace(CreateStream(REF, content_type, None, None, False, body), **changes)


def append(body: bytes = b"x", content_type: str | None = TEXT, **changes: Any) -> Append:
    return replace(Append(REF, content_type, body, False, None, None), **changes)


# A command of the history: an append, a creation, or None for a deletion.
Command = Append | CreateStream | None


def drawn_append(
    body: bytes, close: bool, seq: str | None, producer: ProducerStamp | None
) -> Append:
    """An append as drawn: a body has a Content-Type, an empty one has none."""
    return append(body, TEXT if body else None, close=close, seq=seq, producer=producer)


APPENDS = st.builds(
    drawn_append,
    st.sampled_from([b"", b"a", b"bc"]),
    st.integers(0, 9).map(lambda n: n == 0),  # a closed stream takes little: close rarely
    st.none() | st.integers(0, 6).map(lambda n: f"{n:02d}"),
    st.none()
    | st.builds(ProducerStamp, st.sampled_from(["p", "q"]), st.integers(0, 2), st.integers(0, 4)),
)
# Each command with how many records of other streams share the partition before it.
STEPS = st.tuples(
    st.one_of(APPENDS, APPENDS, APPENDS, st.just(create()), st.none()),
    st.integers(0, 3),
)
COMMANDS = st.lists(STEPS, max_size=60)
# The same commands, at least ten: a shorter history rarely holds several appends in flight
# at once, which is what a driver of the machine must get right.
LONG_COMMANDS = st.lists(STEPS, min_size=10, max_size=60)
