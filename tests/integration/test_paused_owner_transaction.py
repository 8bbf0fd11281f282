"""A paused owner's transaction left open on the meta topic stalls every other instance's view
until its slot is taken over, and no longer.

An owner stopped (SIGSTOP, a long GC-like stall) in the middle of a commit leaves its
transaction open on the single meta partition: read_committed readers stop at its first record,
so every instance's meta follower stops applying what the other owners commit. Stopping a
process in the middle of a commit cannot be timed, so the test holds the same transaction
itself: a producer with the paused owner's slot's transactional id (which fences the owner's
own producer, as its open transaction would be fenced) leaves one open on the meta topic, with
the writers' `transaction.timeout.ms`. The slot's new owner ends it when it takes the slot
over (its init_transactions aborts it), one owners' session after the pause; a third
instance shows a stream the other owner made meanwhile only then. An append is another
matter: the third instance learns a stream's tail from the stream's partition, not from the
meta topic (`adapter/state/data_tails.py`), and reads it at once.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import KafkaException, Producer

from adapter.log.writer import TRANSACTION_TIMEOUT_MS
from tests.cluster import TEXT, signal_adapter, stream_in, three_instances, until_read
from topology.naming import StateTopics, writer_transactional_id

pytestmark = [pytest.mark.integration, pytest.mark.faults]

APPENDED = "appended"
STREAM = "w"
STALL_WITHIN_S = 60.0  # the check's patience; the stall is measured, not asserted


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _hold_as_owner(bootstrap: str, prefix: str, slot: int) -> Producer:
    """A transaction open on the meta topic under `slot`'s writer id, as its owner's would be."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": writer_transactional_id(prefix, slot),
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(StateTopics.of(prefix).meta, key=b"held", value=b"")
    producer.flush(30)
    return producer


async def _body(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url, params={"offset": "-1"}) as reply:
        return (
            await reply.text()
            if reply.status == 200
            else f"HTTP {reply.status}: {await reply.text()}"
        )


@pytest.mark.timeout(240)
async def test_a_paused_owners_open_transaction_stalls_the_views_until_its_slot_moves(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"held{unique}."
    async with three_instances(kafka_bootstrap, prefix, tmp_path) as trio:
        session = trio.session
        # b writes the stream, a is paused with a transaction open, c reads.
        b, (a, c) = trio.owner_and_others(prefix, STREAM)
        stream = STREAM
        async with session.put(f"{b}/v1/stream/{stream}", headers=TEXT) as reply:
            assert reply.status == 201, await reply.text()
        read = f"{c}/v1/stream/{stream}"
        assert await until_read(lambda: _body(session, read), "") == ""
        holder = _hold_as_owner(kafka_bootstrap, prefix, min(trio.owners[a]))
        signal_adapter(_port(a), signal.SIGSTOP)
        made = stream_in(prefix, trio.owners[b], "made")  # also written by b
        try:
            appended = time.monotonic()
            async with session.post(f"{b}/v1/stream/{stream}", data=APPENDED, headers=TEXT) as r:
                assert r.status == 204, await r.text()
            assert await _body(session, read) == APPENDED  # from the partition, at once
            async with session.put(f"{b}/v1/stream/{made}", headers=TEXT) as reply:
                assert reply.status == 201, await reply.text()
            made_at_c = f"{c}/v1/stream/{made}"
            during = await _body(session, made_at_c)
            assert during.startswith("HTTP 404"), during  # c's follower is held below it
            seen = await until_read(lambda: _body(session, made_at_c), "", STALL_WITHIN_S)
            stall = time.monotonic() - appended
        finally:
            signal_adapter(_port(a), signal.SIGCONT)
            with contextlib.suppress(KafkaException):  # fenced: the new owner ended it
                holder.abort_transaction(10)
        print(f"\nan owner paused with a meta transaction open: views stalled {stall:.1f}s")
        print(f"a read through another instance meanwhile: {during[:300]}")
        assert seen == ""
