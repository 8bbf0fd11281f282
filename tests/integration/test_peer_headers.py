"""The headers instances send each other (`adapter/http/peer_headers.py`), sent by an outside
client to two instances sharing a `peer_key_file`: refused 403 before anything is done, so
a client can neither mark its write forwarded (never forwarded again, no catch-up first), nor
route it on a forged owner record (refused 503 for ever), nor tag its records with a forward
id of its choosing. The same headers sent with the deployment's key are believed, as from a
peer, and writes forwarded between the two go on as before. Without a key they are believed
from anyone, and still skip none of a producer's exactly-once checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster import TEXT, partitions, past_moves, stream_in, two_instances
from tests.conftest import Client
from tests.kafka_reads import committed_messages
from topology.placement import partition_for
from topology.wire import CONTROL_HEADER, FORWARD_HEADER, header_value

pytestmark = pytest.mark.integration

KEY = "a shared key of the deployment's instances"
FORGED_ID = "f" * 32
# Each alone on an append, as a client forging it would send it.
FORGED = {
    "forwarded": {"Durable-Kafka-Forwarded": "1"},
    "forward id": {"Durable-Kafka-Forwarded": "1", "Durable-Kafka-Forward-Id": FORGED_ID},
    "owner mark": {"Durable-Kafka-Forwarded": "1", "Durable-Kafka-Owner-Mark": "-5"},
    "last access": {"Durable-Kafka-Last-Access": "99999999999999"},
    "certificate": {"Durable-Kafka-Forwarded": "1", "Durable-Kafka-Certificate-Subject": "CN=x"},
    "wrong key": {"Durable-Kafka-Peer-Key": "not the deployment's key at all"},
    "effect": {"Durable-Kafka-Effect": '{"tail": 99999}'},
}


async def test_peer_headers_from_an_outside_client_are_refused_and_nothing_written(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"peerhdr{unique}."
    key = tmp_path / "peer.key"
    key.write_text(KEY + "\n")
    env = {"DURABLE_KAFKA_PEER_KEY_FILE": str(key)}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, env=env) as pair:
        stream = stream_in(prefix, pair.owners[pair.b], "p")
        owner, other = f"{pair.b}/v1/stream/{stream}", f"{pair.a}/v1/stream/{stream}"
        status, body = await past_moves(pair.session, "PUT", owner, headers=TEXT)
        assert status == 201, body
        answers = {}
        for name, headers in FORGED.items():
            for where, url in (("owner", owner), ("other", other)):
                sent = f"{name} {where}"
                async with pair.session.post(url, data=sent, headers=TEXT | headers) as reply:
                    answers[f"{name} to the {where}"] = (reply.status, await reply.text())
        assert {k: status for k, (status, _) in answers.items()} == dict.fromkeys(answers, 403), (
            answers
        )
        # From a peer (the deployment's key): believed, as today; a forged mark is refused.
        peer = {"Durable-Kafka-Peer-Key": KEY} | FORGED["owner mark"]
        async with pair.session.post(owner, data="stale", headers=TEXT | peer) as reply:
            assert reply.status == 503, await reply.text()
        for url in (owner, other):  # and a plain write, forwarded or not, is written
            status, body = await past_moves(pair.session, "POST", url, data="!", headers=TEXT)
            assert status == 204, body
    partition = partition_for(stream.encode(), partitions(prefix))
    messages = committed_messages(kafka_bootstrap, f"{prefix}bucket._default", partition)
    data = [
        m
        for m in messages
        if m.key() == stream.encode() and header_value(m.headers(), CONTROL_HEADER) is None
    ]
    assert [m.value() for m in data] == [b"!", b"!"]
    tags = [header_value(m.headers(), FORWARD_HEADER) for m in data]
    assert FORGED_ID.encode() not in tags, tags


async def test_without_a_peer_key_forged_peer_headers_skip_no_exactly_once_check(
    client: Client, unique: str
) -> None:
    """Believed from anyone without a key (operations, "Peer headers"): a retried producer
    append marked forwarded, with a forward id and a last access of its own, is still applied
    once."""
    path = f"/v1/stream/forged-{unique}"
    assert (await client.put(path, headers=TEXT)).status == 201
    forged = FORGED["forward id"] | FORGED["last access"]
    producer = {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "0"}
    first = await client.post(path, data="once", headers=TEXT | producer | forged)
    again = await client.post(path, data="once", headers=TEXT | producer | forged)
    assert (first.status, again.status) == (200, 204), await first.text()
    read = await client.get(path, params={"offset": "-1"})
    assert await read.text() == "once"
