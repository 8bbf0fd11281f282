"""A clean stop (SIGTERM) hands an instance's write slots over before it drains, and answers
its parked long-polls at once: its slots are never unreachable for the length of a drain.

Instance `a` is stopped while a long-poll waits on it and a slow upload keeps a request in
flight there (so the drain lasts). The long-poll is answered (204), the other instance owns
every slot while `a` still drains, and writes to `a`'s former slots succeed through it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from adapter.protocol.model import RELEASED, SlotOwner
from adapter.state.records import decode_as
from tests.adapter_process import adapter_pid
from tests.cluster import SLOTS, TEXT, owned, past_moves, signal_adapter, stream_in, two_instances
from tests.kafka_reads import committed_messages
from topology.naming import StateTopics

pytestmark = pytest.mark.integration

ENV = {"DURABLE_KAFKA_DRAIN_TIMEOUT_MS": "30000", "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "60000"}
UPLOAD_S = 12.0  # how long the slow upload takes to send its body


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _slowly() -> AsyncIterator[bytes]:
    for _ in range(int(UPLOAD_S * 4)):
        yield b"x"
        await asyncio.sleep(0.25)


async def _answer(
    session: aiohttp.ClientSession, method: str, url: str, **kwargs: object
) -> tuple[int, str]:
    async with session.request(method, url, **kwargs) as reply:  # type: ignore[arg-type]
        return reply.status, await reply.text()


async def _until_all_slots(session: aiohttp.ClientSession, base: str) -> None:
    for _ in range(600):
        if await owned(session, base) == set(range(SLOTS)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{base} never owned every slot")


@pytest.mark.timeout(240)
async def test_sigterm_hands_the_slots_over_before_the_drain(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"cs{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=90, env=ENV) as pair:
        session, a, b = pair.session, pair.a, pair.b
        mine = stream_in(prefix, pair.owners[a], "mine")  # written by a
        theirs = stream_in(prefix, pair.owners[b], "theirs")  # written by b
        for stream in (mine, theirs):
            async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
                assert reply.status == 201, await reply.text()
        async with session.head(f"{a}/v1/stream/{mine}") as reply:
            tail = reply.headers["Stream-Next-Offset"]
        poll = asyncio.create_task(
            _answer(session, "GET", f"{a}/v1/stream/{mine}?offset={tail}&live=long-poll")
        )
        upload = asyncio.create_task(
            _answer(session, "POST", f"{a}/v1/stream/{theirs}", data=_slowly(), headers=TEXT)
        )
        await asyncio.sleep(1.5)  # both are in flight on a
        pid = adapter_pid(urlsplit(a).port or 0)
        os.kill(pid, signal.SIGTERM)

        polled = await poll
        assert polled[0] == 204, polled  # answered, not cut off by the drain
        await _until_all_slots(session, b)
        assert _alive(pid), "a exited before its slots moved: they waited out the drain"
        assert not upload.done(), "the drain was not held by the upload in flight"
        status, body = await past_moves(session, "POST", f"{b}/v1/stream/{mine}", data="after")
        assert status == 204, body
        upload.cancel()  # it held the drain; how it ends is not what this test is about
        await asyncio.gather(upload, return_exceptions=True)
        async with session.get(f"{b}/v1/stream/{mine}?offset=-1") as reply:
            assert await reply.text() == "after"


@pytest.mark.timeout(240)
async def test_a_clean_stop_releases_each_slot_before_its_next_owner_takes_it(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A stopping owner's last record of each slot is its release, committed by the slot's
    producer after its last commit: a forwarder waiting on a write it sent there learns its
    outcome from the log then, not when (or if) a next owner comes."""
    prefix = f"cr{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=90) as pair:
        session, a, b = pair.session, pair.a, pair.b
        mine = stream_in(prefix, pair.owners[a], "mine")
        status, body = await past_moves(session, "PUT", f"{a}/v1/stream/{mine}", headers=TEXT)
        assert status == 201, body
        signal_adapter(urlsplit(a).port or 0, signal.SIGTERM)
        await _until_all_slots(session, b)
        owners = StateTopics.of(prefix).owners
        history: dict[int, list[str]] = {}
        for message in committed_messages(kafka_bootstrap, owners):
            record = decode_as(SlotOwner, (message.key() or b"").decode(), message.value() or b"")
            history.setdefault(record.slot, []).append(record.url)
        for slot in pair.owners[a]:
            urls = history[slot]
            last_of_a = len(urls) - 1 - urls[::-1].index(a)
            assert urls[last_of_a + 1 :][:2] == [RELEASED, b], (slot, urls)
