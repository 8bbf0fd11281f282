"""Every write route answers the same through its slot's owner, through another instance (which
forwards it), and through another instance whose owner went silent after committing it (which
learns the answer from the log): the same status, headers and body, but for what names the
stream, the instance's address, or a position in the log (each checked against a HEAD there)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from adapter.protocol.offsets import parse_offset
from tests.cluster import SLOTS, TEXT, stream_in, two_instances
from tests.faulty_adapter import fault_env
from topology.slots import slot_of_bucket

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Said of the answer by its transport, not by the route: left out of the comparison.
TRANSPORT = frozenset({"date", "server", "x-request-id", "content-length", "keep-alive"})
POSITIONS = ("stream-next-offset", "stream-earliest-offset")  # where the stream is now
CLOSE = {"Stream-Closed": "true"}


@dataclass(frozen=True)
class Step:
    """One write: its method, the path below the stream, its headers and body."""

    method: str
    below: str = ""
    headers: Mapping[str, str] = field(default_factory=lambda: TEXT)
    body: bytes | None = None


def _producer(seq: int) -> dict[str, str]:
    return TEXT | {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}


# Every write route, its successes and its refusals, in an order that reaches each.
STEPS = [
    Step("PUT"),  # created, 201
    Step("PUT"),  # as asked already, 200
    Step("PUT", headers={"Content-Type": "application/json"}),  # another type, 409
    Step("POST", body=b"abc"),  # 204
    Step("POST", headers=TEXT | {"If-Match": '"not-it"'}, body=b"x"),  # 412
    Step("POST", headers=_producer(0), body=b"p0"),  # new data, 200
    Step("POST", headers=_producer(0), body=b"p0"),  # its duplicate, 204
    Step("POST", headers=_producer(5), body=b"p5"),  # a gap, 409
    Step("POST", "/fence", headers={"Stream-Fencing-Token": "7"}),  # 204
    Step("POST", headers=TEXT | {"Stream-Fencing-Token": "6"}, body=b"x"),  # fenced out
    Step("POST", headers=TEXT | {"Stream-Fencing-Token": "7"}, body=b"fenced"),  # 204
    Step("POST", "/trim", {"Content-Type": "application/json"}, b'{"before": "{tail}"}'),
    Step("POST", "/trim", {"Content-Type": "application/json"}, b'{"before": "x"}'),  # 400
    Step("POST", headers=TEXT | CLOSE | {"Stream-Fencing-Token": "7"}, body=b"end"),  # closes
    Step("POST", headers=TEXT | {"Stream-Fencing-Token": "7"}, body=b"more"),  # closed, 409
    Step("DELETE"),  # 204
    Step("DELETE"),  # 404
]
JSON = {"Content-Type": "application/json"}


def _shape(
    status: int, headers: Mapping[str, str], body: bytes, names: Mapping[str, str]
) -> tuple[int, list[tuple[str, str]], str]:
    """What must be equal between two answers: named things and positions replaced."""

    def plain(text: str) -> str:
        text = re.sub(r"https?://[0-9.:a-z]+", "{origin}", text)
        text = re.sub(r"\b1[0-9]{12}\b", "{ms}", text)  # a time in ms: when it was made
        for name, role in names.items():
            text = text.replace(name, role)
        return text

    kept = sorted(
        (k, "{position}" if k in POSITIONS else "{etag}" if k == "etag" else plain(v))
        for k, v in ((k.lower(), v) for k, v in headers.items())
        if k.lower() not in TRANSPORT
    )
    return status, kept, plain(body.decode(errors="replace"))


async def _answer(
    session: aiohttp.ClientSession, base: str, path: str, step: Step, names: Mapping[str, str]
) -> tuple[int, list[tuple[str, str]], str]:
    """The step's answer at `base`, its positions and ETag first checked against a HEAD of
    the stream there (a write answered with the stream as it left it)."""
    url, body = f"{base}{path}{step.below}", step.body
    if body is not None and b"{tail}" in body:  # the stream's tail here, now
        async with session.head(f"{base}{path}") as state:
            body = body.replace(b"{tail}", state.headers["Stream-Next-Offset"].encode())
    async with session.request(step.method, url, headers=step.headers, data=body) as reply:
        status, headers, body = reply.status, reply.headers.copy(), await reply.read()
    if status < 300 and "Stream-Next-Offset" in headers:
        async with session.head(f"{base}{path}") as state:
            assert state.headers["Stream-Next-Offset"] == headers["Stream-Next-Offset"]
            if "ETag" in headers:
                assert state.headers["ETag"] == headers["ETag"], (step, headers)
    return _shape(status, headers, body, names)


@pytest.mark.timeout(240)
async def test_each_write_is_answered_alike_through_its_owner_and_another_instance(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"fwa{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 60) as pair:
        session, a, b, owners = pair.session, pair.a, pair.b, pair.owners
        direct, relayed = stream_in(prefix, owners[b], "d"), stream_in(prefix, owners[b], "r")
        for step in STEPS:
            mine = await _answer(session, b, f"/v1/stream/{direct}", step, {direct: "{s}"})
            theirs = await _answer(session, a, f"/v1/stream/{relayed}", step, {relayed: "{s}"})
            assert theirs == mine, step
        # What the owner tells a forwarder the write changed; never shown to a client.
        forwarded = TEXT | {"Durable-Kafka-Forwarded": "1"}
        stream = stream_in(prefix, owners[b], "e")
        assert (await session.put(f"{b}/v1/stream/{stream}", headers=TEXT)).status == 201
        async with session.post(f"{b}/v1/stream/{stream}", data="x", headers=forwarded) as r:
            after = parse_offset(r.headers["Stream-Next-Offset"])
            assert json.loads(r.headers["Durable-Kafka-Effect"]) == {"tail": after}
        async with session.post(f"{a}/v1/stream/{stream}", data="y", headers=TEXT) as r:
            assert r.status == 204
            assert "Durable-Kafka-Effect" not in r.headers
        # A fork; a bucket's creation, configuration, snapshot publish and deletion.
        source = stream_in(prefix, owners[b], "src")
        assert (await session.put(f"{b}/v1/stream/{source}", headers=TEXT)).status == 201
        assert (await session.post(f"{b}/v1/stream/{source}", data="s")).status == 204
        fork = Step("PUT", headers=TEXT | {"Stream-Forked-From": source})
        forks = []
        for base, stem in ((b, "fd"), (a, "fr")):
            stream = stream_in(prefix, owners[b], stem)
            forks.append(
                await _answer(session, base, f"/v1/stream/{stream}", fork, {stream: "{s}"})
            )
        assert forks[1] == forks[0]
        config = json.dumps({"max_age_ms": 600_000}).encode()
        answers = []
        for base, stem in ((b, "bd"), (a, "br")):
            bucket = next(
                f"{stem}-{i:03}"
                for i in range(1000)
                if slot_of_bucket(f"{stem}-{i:03}", SLOTS) in owners[b]
            )
            names = {bucket: "{b}"}
            steps = [
                Step("PUT", headers=JSON, body=b"{}"),
                Step("PUT", headers=JSON, body=b"{}"),
                Step("PUT", "/config", JSON, config),
                Step("PUT", headers=JSON, body=b"{}"),
            ]
            answered = [await _answer(session, base, f"/{bucket}", s, names) for s in steps]
            stream = f"/{bucket}/snap"
            async with session.put(f"{b}{stream}", headers=TEXT) as made:
                assert made.status == 201, (answered, await made.text())
            assert (await session.post(f"{b}{stream}", data="abc")).status == 204
            async with session.head(f"{b}{stream}") as state:
                tail = state.headers["Stream-Next-Offset"]
            for publish in (
                Step("PUT", f"/snapshot/{tail}", {"Content-Type": "text/plain"}, b"S"),
                Step("PUT", "/snapshot/zzz", {"Content-Type": "text/plain"}, b"S"),
            ):
                answered.append(await _answer(session, base, stream, publish, names))
            answered.append(await _answer(session, base, f"/{bucket}", Step("DELETE"), names))
            answered.append(await _answer(session, base, f"/{bucket}", Step("DELETE"), names))
            answers.append(answered)
        assert answers[1] == answers[0]


# The writes a silent owner's answer is learned for: each sent to an owner that exits right
# after committing it, through another instance; its answer compared with the owner's own.
LEARNED = {
    "create": [Step("PUT")],
    "append": [Step("PUT"), Step("POST", body=b"abc")],
    "producer": [Step("PUT"), Step("POST", headers=_producer(0), body=b"p0")],
    "close": [Step("PUT"), Step("POST", headers=TEXT | CLOSE, body=b"end")],
    "delete": [Step("PUT"), Step("DELETE")],
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", sorted(LEARNED))
async def test_a_write_whose_owner_went_silent_is_answered_as_the_owner_would(
    kafka_bootstrap: str, unique: str, tmp_path: Path, name: str
) -> None:
    prefix, dying = f"fwl{unique}.", fault_env(crash_after_forwarded_commit=True)
    *before, last = LEARNED[name]
    async with two_instances(kafka_bootstrap, prefix, tmp_path, 120, env_b=dying) as pair:
        session, a, b, owners = pair.session, pair.a, pair.b, pair.owners
        direct, learned = stream_in(prefix, owners[b], "d"), stream_in(prefix, owners[b], "l")
        for step in before:  # through the owner itself: nothing dies
            for stream in (direct, learned):
                await _answer(session, b, f"/v1/stream/{stream}", step, {})
        mine = await _answer(session, b, f"/v1/stream/{direct}", last, {direct: "{s}"})
        # Through `a`: forwarded to `b`, which commits it and exits before answering.
        theirs = await _answer(session, a, f"/v1/stream/{learned}", last, {learned: "{s}"})
    assert theirs == mine
