"""Background work rides out what a request would be answered 503 or 504 for.

The tier worker's commit of a range loses its reply and its outcome cannot be learned in
time (OutcomeUnknown, what a request gets 504 for): the pass is tried again later, the process
keeps serving, and an SSE session open since before sees every message once.
"""

from __future__ import annotations

import asyncio

import pytest

from adapter.app import FATAL, PARTS, create_app
from adapter.log import outcomes
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready

TEXT = {"Content-Type": "text/plain"}
STREAM = "/background/s"


async def _sse_data(client: Client) -> bytes:
    """Every data event of an SSE session from the start, until the stream is closed."""
    async with client.get(STREAM, params={"offset": "-1", "live": "sse"}) as reply:
        body = (await asyncio.wait_for(reply.read(), 150)).decode()
    events = [block.split("\n") for block in body.strip().split("\n\n")]
    return "".join(e[1].removeprefix("data:") for e in events if e[0] == "event: data").encode()


async def _appended(client: Client, body: bytes, headers: dict[str, str]) -> None:
    """Append, retrying while the slot answers 503 (learning an outcome)."""
    for _ in range(300):
        async with client.post(STREAM, data=body, headers=headers) as reply:
            if reply.status != 503:
                assert reply.status == 204, await reply.text()
                return
        await asyncio.sleep(0.2)
    raise AssertionError("the slot kept answering 503")


@pytest.mark.timeout(240)
async def test_an_unknown_outcome_in_a_tier_pass_does_not_stop_the_process(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(
        partitions=1,
        write_slots=1,
        tier_after_bytes=1024,
        tier_after_ms=3_000,  # the data becomes due well after the fault is armed
        tier_interval_ms=200,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    parts, fatal = client.app[PARTS], client.app[FATAL]
    assert (await client.put("/background")).status == 201
    assert (await client.put(STREAM, headers=TEXT)).status == 201
    live = asyncio.create_task(_sse_data(client))
    first = [b"x" * 3000, b"w" * 2000]  # the first is tiered once due: 2000 bytes follow it
    for body in first:
        async with client.post(STREAM, data=body, headers=TEXT) as reply:
            assert reply.status == 204
    # The next commit of the instance is the tier pass's range: its reply is lost, and the
    # broker never says whether it committed.
    parts.writers.faults.drop_commit_replies = 1
    monkeypatch.setattr(outcomes, "committed", lambda *_args: None)
    for _ in range(1200):
        if fatal.done() or "could not be learned" in (parts.tiering.last_error or ""):
            break
        await asyncio.sleep(0.1)
    assert not fatal.done(), f"the process stops: {fatal.result()!r}"
    assert "could not be learned" in (parts.tiering.last_error or "")
    monkeypatch.undo()
    assert (await client.get("/readyz")).status == 200
    await _appended(client, b"y", TEXT)
    await _appended(client, b"z", {**TEXT, "Stream-Closed": "true"})
    assert await live == b"".join(first) + b"yz"
    assert not fatal.done()
