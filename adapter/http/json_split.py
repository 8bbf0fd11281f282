"""JSON bodies split into messages before their command is decided, a step at a time.

Python's JSON parser holds the event loop (and the GIL: a thread does not help) for as long
as one call takes, 1.5 s for an 8 MiB value of short keys. `json_mode.split_steps` parses at
most a window of text per step; this runs the steps with a turn of the event loop between
them, and hands the outcome to the command (`SplitBody`), refusal included: the stream's
rules raise it where they would have split the body themselves.
"""

from __future__ import annotations

import asyncio

from adapter.protocol import json_mode
from adapter.protocol.errors import ProtocolError
from adapter.protocol.headers import is_json
from adapter.protocol.json_mode import SplitBody


async def split_body(
    body: bytes, content_type: str | None, limit: int, *, initial: bool = False
) -> SplitBody | None:
    """The messages of a JSON body (an append's, or with `initial` a creation's), at most
    `limit`; None for a body that is not JSON or is empty (the stream's rules judge it)."""
    if not body or content_type is None or not is_json(content_type):
        return None
    steps = json_mode.split_steps(body, limit) if initial else json_mode.append_steps(body, limit)
    try:
        while True:
            next(steps)
            await asyncio.sleep(0)  # the rest of the loop runs between two steps
    except StopIteration as done:
        return SplitBody(tuple(done.value))
    except ProtocolError as refusal:
        return SplitBody(refusal=refusal)
