"""JSON bodies split at the edge: the event loop turns between the steps."""

from __future__ import annotations

import asyncio
import json

from adapter.http.json_split import split_body
from adapter.protocol import json_mode
from adapter.protocol.errors import ErrorCode

JSON = "application/json"


async def _turns(stop: asyncio.Event) -> int:
    """Turns of the loop counted until `stop` is set."""
    turns = 0
    while not stop.is_set():
        await asyncio.sleep(0)
        turns += 1
    return turns


async def test_the_loop_turns_between_the_steps_of_a_large_value() -> None:
    body = json.dumps({"values": list(range(300_000))}).encode()  # 2 MiB, one message
    stop = asyncio.Event()
    counting = asyncio.create_task(_turns(stop))
    await asyncio.sleep(0)
    split = await split_body(body, JSON, 10_000)
    stop.set()
    assert split is not None
    assert split.result() == [body]
    assert await counting >= len(body) // json_mode.STEP_CHARS


async def test_a_refusal_is_kept_for_the_streams_rules_to_raise() -> None:
    split = await split_body(b"[1, 2, 3]", JSON, 2)
    assert split is not None
    assert split.refusal is not None
    assert split.refusal.code is ErrorCode.PAYLOAD_TOO_LARGE


async def test_bodies_not_json_or_empty_are_left_to_the_streams_rules() -> None:
    assert await split_body(b"[1]", "text/plain", 10) is None
    assert await split_body(b"", JSON, 10) is None
