"""Mixed client load through several instances, every attempt recorded in a History."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

import aiohttp

from tests.faults.history import (
    Bootstrap,
    BucketEvent,
    Fork,
    History,
    Lifecycle,
    Outcome,
    Producer,
    Publish,
    Read,
    Trim,
    View,
    Write,
)
from topology.wire import decode_token, encode_token

JSON = {"Content-Type": "application/json"}
REQUEST_TIMEOUT_S = 8.0
PAUSE_S = 0.02  # between a worker's operations: load, not a flood, on 2 shared cores
ROUND_S = 0.5  # between the rounds of the snapshot and fork workers (few streams to view)
DEFAULT_BUCKET = "_default"  # the bucket of `/v1/stream/{stream}`
FORKS_BUCKET = "xforks"  # where `cross_forker` forks streams of the default bucket to
AGED_BUCKET = "aged"  # a bucket with age retention, written by `aged_writer`
AGE_MS = 4000  # its `max_age_ms`: everything is trimmed by the time the views are taken
FENCE_EVERY = 8  # appends of one fencing token before the next writer fences it out
MAX_PAGES = 200  # of one catch-up read, so a reader that never reaches the tail still ends


@dataclass
class Answer:
    outcome: Outcome
    status: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Load:
    session: aiohttp.ClientSession
    bases: dict[str, str]  # instance name -> base URL, the ones clients may use now
    rng: random.Random
    history: History = field(default_factory=History)
    streams: set[str] = field(default_factory=set)
    buckets: set[str] = field(default_factory=lambda: {DEFAULT_BUCKET})
    held: set[str] = field(default_factory=set)  # streams `recreated` must not create now
    running: bool = True
    counter: int = 0
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    def spawn(self, work: Awaitable[None]) -> None:
        """Run a worker until the load stops (`running` false); `finish` awaits them all."""
        self.workers.append(asyncio.ensure_future(work))

    async def finish(self, timeout_s: float) -> None:
        self.running = False
        await asyncio.wait_for(asyncio.gather(*self.workers), timeout_s)

    async def abandon(self) -> None:
        """Stop every worker at once, whatever it is doing (the scenario failed)."""
        self.running = False
        for worker in self.workers:
            worker.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)

    def url(self, stream: str, instance: str | None = None) -> tuple[str, str]:
        name = instance or self.rng.choice(sorted(self.bases))
        return name, self.bases[name] + stream_path(stream)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    async def call(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Answer:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        try:
            async with self.session.request(
                method, url, headers=headers, data=body, timeout=timeout
            ) as reply:
                content = await reply.read()
                return Answer(Outcome.of_status(reply.status), reply.status, reply.headers, content)
        except TimeoutError:
            return Answer(Outcome.TIMEOUT)
        except aiohttp.ClientError:
            return Answer(Outcome.LOST)

    async def write(
        self,
        stream: str,
        payload: str | None,
        producer: Producer | None = None,
        close: bool = False,
        seq: str | None = None,
        instance: str | None = None,
        token: str | None = None,
    ) -> Write:
        headers = dict(JSON)
        if token is not None:
            headers["Stream-Fencing-Token"] = token
        if producer is not None:
            headers |= {
                "Producer-Id": producer.producer_id,
                "Producer-Epoch": str(producer.epoch),
                "Producer-Seq": str(producer.seq),
            }
        if close:
            headers["Stream-Closed"] = "true"
        if seq is not None:
            headers["Stream-Seq"] = seq
        body = json.dumps({"p": payload}).encode() if payload is not None else b""
        instance, url = self.url(stream, instance)
        invoked = self.history.now()
        answer = await self.call("POST", url, headers, body)
        token = answer.headers.get("Stream-Next-Offset") if answer.outcome is Outcome.ACK else None
        write = Write(
            stream, payload, invoked, self.history.now(), answer.outcome, answer.status,
            producer, close, instance, None if token is None else decode_token(token),
        )  # fmt: skip
        self.history.writes.append(write)
        return write

    async def lifecycle(self, stream: str, action: str, instance: str | None = None) -> Answer:
        _, url = self.url(stream, instance)
        invoked = self.history.now()
        answer = await self.call("PUT" if action == "create" else "DELETE", url, JSON)
        self.history.lifecycle.append(
            Lifecycle(stream, action, invoked, self.history.now(), answer.outcome, answer.status)
        )
        if action == "create":
            self.streams.add(stream)
        return answer

    async def create(self, stream: str, instance: str | None = None) -> None:
        """Create until acknowledged (a retried create of the same stream is idempotent)."""
        while self.running:
            if (await self.lifecycle(stream, "create", instance)).outcome is Outcome.ACK:
                return
            await asyncio.sleep(0.2)

    async def bucket(
        self, bucket: str, action: str, instance: str | None = None, body: bytes = b""
    ) -> Answer:
        """One create or delete of a bucket, recorded (`body`: a create's configuration)."""
        name = instance or self.rng.choice(sorted(self.bases))
        invoked = self.history.now()
        method, headers = ("PUT", JSON if body else {}) if action == "create" else ("DELETE", {})
        answer = await self.call(method, f"{self.bases[name]}/{bucket}", headers, body)
        self.history.buckets.append(
            BucketEvent(bucket, action, invoked, self.history.now(), answer.outcome, answer.status)
        )
        if action == "create" and answer.outcome is Outcome.ACK:
            self.buckets.add(bucket)
        return answer

    # --- writers ---------------------------------------------------------------------------

    async def producer(self, stream: str, pid: str) -> None:
        """Producer-* appends, seq 0, 1, ...; each retried with the same seq until answered."""
        seq = 0
        while self.running:
            stamp = Producer(pid, 0, seq)
            write = await self.write(stream, f"{pid}.{seq}", stamp)
            if write.outcome is Outcome.REJECTED:
                return  # a 4xx for a retried seq: stop this producer rather than guess
            if write.outcome is Outcome.ACK:
                seq += 1
            await asyncio.sleep(PAUSE_S)

    async def plain(self, stream: str) -> None:
        """Appends without producer headers: never retried, each attempt a new payload."""
        while self.running:
            await self.write(stream, self.fresh(f"{stream}.plain."))
            await asyncio.sleep(PAUSE_S)

    async def sequenced(self, stream: str) -> None:
        """Stream-Seq appends (zero-padded, so lexicographic is numeric); retried on unknown."""
        n = 0
        while self.running:
            write = await self.write(stream, f"{stream}.seq.{n}", seq=f"{n:08d}")
            if write.outcome in (Outcome.ACK, Outcome.REJECTED):
                n += 1  # a 409 on a retry: the first attempt landed
            await asyncio.sleep(PAUSE_S)

    async def closer(self) -> None:
        """New streams: a few appends, a close (retried until answered), one append after."""
        while self.running:
            stream = self.fresh("closed")
            await self.create(stream)
            for _ in range(3):
                await self.write(stream, self.fresh(f"{stream}."))
            while self.running:
                close = await self.write(stream, None, close=True)
                if close.outcome in (Outcome.ACK, Outcome.REJECTED):
                    break
                await asyncio.sleep(0.2)  # like every other retry: not a flood of 503s
            await self.write(stream, self.fresh(f"{stream}.late."))  # must be refused

    async def recreated(self, stream: str) -> None:
        """Plain appends to a stream of a bucket that may be deleted and created again: a 404
        (bucket or stream gone) is followed by a create of the stream, unless it is held."""
        while self.running:
            write = await self.write(stream, self.fresh(f"{stream}."))
            if write.status == 404 and stream not in self.held:
                await self.lifecycle(stream, "create")
            await asyncio.sleep(PAUSE_S)

    async def churn(self, instance: str | None = None) -> None:
        """Streams created, written by a new producer, deleted."""
        while self.running:
            stream = self.fresh("churn")
            await self.create(stream, instance)
            await self.write(stream, f"{stream}.0", Producer(stream, 0, 0))
            await self.lifecycle(stream, "delete", instance)

    async def publish(self, stream: str, offset: int, blob: str) -> Publish:
        _, url = self.url(stream)
        headers = {"Content-Type": "application/x-state"}
        invoked = self.history.now()
        answer = await self.call(
            "PUT", f"{url}/snapshot/{encode_token(offset)}", headers, blob.encode()
        )
        attempt = Publish(
            stream, offset, blob, invoked, self.history.now(), answer.outcome, answer.status
        )
        self.history.publishes.append(attempt)
        return attempt

    async def fork(self, stream: str, source: str, offset: int) -> bool:
        """Create `stream` as a fork of `source` at `offset`, retried (idempotent) until
        answered; whether it was acknowledged."""
        headers = JSON | {
            "Stream-Forked-From": f"/v1/stream/{source}",
            "Stream-Fork-Offset": encode_token(offset),
        }
        while self.running:
            _, url = self.url(stream)
            invoked = self.history.now()
            answer = await self.call("PUT", url, headers)
            done = self.history.now()
            attempt = Fork(stream, source, offset, invoked, done, answer.outcome, answer.status)
            self.history.forks.append(attempt)
            if answer.outcome is Outcome.ACK:
                self.streams.add(stream)
                return True
            if answer.outcome is Outcome.REJECTED:
                return False
            await asyncio.sleep(0.2)
        return False

    async def _two_appends(self, stream: str) -> list[int]:
        """Two appends to `stream`: the tails of those acknowledged."""
        writes = [await self.write(stream, self.fresh(f"{stream}.")) for _ in range(2)]
        return [w.next_offset for w in writes if w.next_offset is not None]

    async def _until_answered(self, send: Callable[[], Awaitable[Publish | Trim]]) -> None:
        """Send again until answered, acknowledged or refused: an unknown outcome may not have
        landed, and the attempt is the same each time (idempotent)."""
        while self.running:
            if (await send()).outcome in (Outcome.ACK, Outcome.REJECTED):
                return
            await asyncio.sleep(0.2)

    async def publisher(self, stream: str = "snap") -> None:
        """Appends to a stream of its own, then a snapshot at the last acknowledged tail
        (retried until answered); then a read from -1 (which must be refused) and one from
        the snapshot's offset, both recorded if served."""
        await self.create(stream)
        while self.running:
            tails = await self._two_appends(stream)
            if not tails:
                continue
            tail, blob = max(tails), self.fresh("blob.")
            await self._until_answered(partial(self.publish, stream, tail, blob))
            await self.read_once(stream, "-1")
            await self.read_once(stream, encode_token(tail))
            await asyncio.sleep(ROUND_S)

    async def forker(self, source: str = "forksrc") -> None:
        """Appends to a source of its own; a fork at an acknowledged tail; appends to the
        fork and a read of it from -1 (its inherited range, then its own records)."""
        await self.create(source)
        while self.running:
            tail = (await self.write(source, self.fresh(f"{source}."))).next_offset
            if tail is None:
                continue
            stream = self.fresh("fork")
            if await self.fork(stream, source, tail):
                for _ in range(2):
                    await self.write(stream, self.fresh(f"{stream}."))
                await self.read_once(stream, "-1")
            await asyncio.sleep(ROUND_S)

    async def cross_forker(self, source: str = "xsrc") -> None:
        """As `forker`, with the forks in a bucket of their own: their records are keyed
        `{bucket}//{id}` in the source's topic, which tiering and retention must not free."""
        while self.running and FORKS_BUCKET not in self.buckets:
            await self.bucket(FORKS_BUCKET, "create")
            await asyncio.sleep(ROUND_S)
        await self.create(source)
        while self.running:
            tail = (await self.write(source, self.fresh(f"{source}."))).next_offset
            if tail is None:
                continue
            stream = f"{FORKS_BUCKET}/{self.fresh('xfork')}"
            if await self.fork(stream, source, tail):
                for _ in range(2):
                    await self.write(stream, self.fresh("xfork."))
                await self.read_once(stream, "-1")
            await asyncio.sleep(ROUND_S)

    async def aged_writer(self, stream: str = "old") -> None:
        """Appends to a stream of a bucket with age retention (`AGE_MS`), and reads of it from
        -1: once a pass trimmed it, refused (not recorded); served, they must match the log."""
        config = json.dumps({"retention": {"max_age_ms": AGE_MS}}).encode()
        while self.running and AGED_BUCKET not in self.buckets:
            await self.bucket(AGED_BUCKET, "create", body=config)
            await asyncio.sleep(ROUND_S)
        name = f"{AGED_BUCKET}/{stream}"
        await self.create(name)
        while self.running:
            for _ in range(4):
                await self.write(name, self.fresh(f"{stream}."))
                await asyncio.sleep(PAUSE_S)
            await self.read_once(name, "-1")
            await asyncio.sleep(ROUND_S)

    async def trimmer(self, stream: str = "trimmed") -> None:
        """Appends, then a trim below an acknowledged tail (retried until answered), then a
        read from -1 (refused once the trim landed, so not recorded) and one from the trim."""
        await self.create(stream)
        while self.running:
            tails = await self._two_appends(stream)
            if not tails:
                continue
            tail = min(tails)
            await self._until_answered(partial(self.trim, stream, tail))
            await self.read_once(stream, "-1")
            await self.read_once(stream, encode_token(tail))
            await asyncio.sleep(ROUND_S)

    async def trim(self, stream: str, before: int) -> Trim:
        _, url = self.url(stream)
        body = json.dumps({"before": encode_token(before)}).encode()
        invoked = self.history.now()
        answer = await self.call("POST", f"{url}/trim", JSON, body)
        attempt = Trim(stream, before, invoked, self.history.now(), answer.outcome, answer.status)
        self.history.trims.append(attempt)
        return attempt

    async def fencer(self, stream: str = "fenced") -> None:
        """Writers taking a stream over one after another: each fences it with a token of its
        own and appends with it; the writer fenced out tries once more with its old token
        (412, never in the log)."""
        await self.create(stream)
        token: str | None = None
        while self.running:
            fresh = self.fresh("writer")
            _, url = self.url(stream)
            answer = await self.call("POST", f"{url}/fence", {"Stream-Fencing-Token": fresh})
            self.history.fences.append(answer.outcome)
            if answer.outcome is not Outcome.ACK:
                await asyncio.sleep(0.2)
                continue
            if token is not None:
                await self.write(stream, self.fresh(f"{stream}.stale."), token=token)
            token = fresh
            for _ in range(FENCE_EVERY):
                await self.write(stream, self.fresh(f"{stream}."), token=token)
                await asyncio.sleep(PAUSE_S)

    # --- readers ---------------------------------------------------------------------------

    async def read_once(self, stream: str, offset: str, kind: str = "get") -> Answer:
        """One GET; recorded when served (a 410 below a retention point is not a read)."""
        _, url = self.url(stream)
        invoked = self.history.now()
        answer = await self.call("GET", f"{url}?offset={offset}", {})
        if answer.status == 200:
            token = answer.headers["Stream-Next-Offset"]
            done = answer.headers.get("Stream-Up-To-Date") == "true"
            self._read(stream, offset, token, json.loads(answer.body), kind, invoked, done)
        return answer

    async def catchup(self, streams: list[str]) -> None:
        """Catch-up reads through to the tail, from -1 or from an offset an append answered a
        while ago: reads of old data, which tiering has moved to the cold tier."""
        while self.running:
            for stream in streams:
                await self.read_through(stream, self.rng.choice(["-1", self._old_offset(stream)]))
            await asyncio.sleep(ROUND_S)

    def _old_offset(self, stream: str) -> str:
        tails = [w.next_offset for w in self.history.writes if w.stream == stream]
        known = [t for t in tails[: max(1, len(tails) // 2)] if t is not None]
        return encode_token(self.rng.choice(known)) if known else "-1"

    async def read_through(self, stream: str, offset: str) -> None:
        """GETs from `offset` on until one says it is up to date; every one recorded."""
        for _ in range(MAX_PAGES):
            answer = await self.read_once(stream, offset, "catchup")
            if answer.status != 200 or answer.headers.get("Stream-Up-To-Date") == "true":
                return
            offset = answer.headers["Stream-Next-Offset"]

    async def bootstrapper(self, streams: list[str]) -> None:
        """`/bootstrap` of each stream in turn: a snapshot (if any) and every message after it,
        old ones from the cold tier."""
        while self.running:
            for stream in streams:
                await self.bootstrap(stream)
            await asyncio.sleep(ROUND_S)

    async def bootstrap(self, stream: str) -> None:
        """One `/bootstrap`; recorded when answered in full."""
        _, url = self.url(stream)
        invoked = self.history.now()
        answer = await self.call("GET", f"{url}/bootstrap", {})
        found = bootstrap_of(stream, answer, invoked, self.history.now())
        if found is not None:
            self.history.bootstraps.append(found)

    async def long_poll(self, stream: str) -> None:
        offset = "-1"
        while self.running:
            _, url = self.url(stream)
            answer = await self.call("GET", f"{url}?offset={offset}&live=long-poll", {})
            if answer.outcome is not Outcome.ACK:
                await asyncio.sleep(0.2)
                continue
            token = answer.headers.get("Stream-Next-Offset", offset)
            if answer.status == 200:
                self._read(stream, offset, token, json.loads(answer.body), "long-poll")
            offset = token

    async def sse(self, stream: str) -> None:
        offset = "-1"
        while self.running:
            _, url = self.url(stream)
            try:
                offset = await self._sse_session(stream, f"{url}?live=sse&offset=", offset)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                await asyncio.sleep(0.2)

    async def _sse_session(self, stream: str, url: str, offset: str) -> str:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=REQUEST_TIMEOUT_S)
        async with self.session.get(url + offset, timeout=timeout) as reply:
            if reply.status != 200:
                await asyncio.sleep(0.2)
                return offset
            event, data, pending = "", "", list[object]()
            async for raw in reply.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event:"):
                    event, data = line[6:].strip(), ""
                elif line.startswith("data:"):
                    data += line[5:].removeprefix(" ")
                elif not line and event == "data":
                    pending += json.loads(data)
                elif not line and event == "control":
                    token = json.loads(data)["streamNextOffset"]
                    if pending:
                        self._read(stream, offset, token, pending, "sse")
                    offset, pending = token, []
                if not self.running:
                    break
        return offset

    def _read(
        self,
        stream: str,
        start: str,
        token: str,
        messages: list[object],
        kind: str,
        invoked: float | None = None,
        up_to_date: bool = False,
    ) -> None:
        payloads = tuple(str(m["p"]) for m in messages if isinstance(m, dict))
        first = 0 if start == "-1" else decode_token(start)
        now = self.history.now()
        read = Read(stream, first, decode_token(token), payloads, now, kind, invoked, up_to_date)
        self.history.reads.append(read)


async def view(load: Load, base: str, stream: str) -> View:
    """HEAD and a whole GET of a stream through one instance (retried while unavailable); of a
    stream with a snapshot, the snapshot, the status of a read from -1, and a GET from it."""
    url = base + stream_path(stream)
    for _ in range(30):
        head = await load.call("HEAD", url, {})
        if head.outcome is Outcome.ACK or head.status == 404:
            break
        await asyncio.sleep(1)
    if head.status != 200:
        return View(head.status, None, False, ())
    payloads: list[str] = []
    offset = head.headers.get("Stream-Snapshot-Offset", "-1")
    snapshot, below, earliest = None, 0, None
    if offset != "-1":
        blob = await load.call("GET", f"{url}/snapshot/{offset}", {})
        snapshot = blob.body.decode() if blob.status == 200 else f"status {blob.status}"
        below = (await load.call("GET", f"{url}?offset=-1", {})).status
    else:
        first = await load.call("GET", f"{url}?offset=-1", {})
        if first.status == 410 and "Stream-Earliest-Offset" in first.headers:
            offset = first.headers["Stream-Earliest-Offset"]
            below, earliest = 410, decode_token(offset)
    while True:
        answer = await load.call("GET", f"{url}?offset={offset}", {})
        if answer.status != 200:
            return View(answer.status, None, False, tuple(payloads))
        payloads += [str(m["p"]) for m in json.loads(answer.body)]
        offset = answer.headers["Stream-Next-Offset"]
        if answer.headers.get("Stream-Up-To-Date") == "true":
            break
    closed = head.headers.get("Stream-Closed") == "true"
    tail = decode_token(head.headers["Stream-Next-Offset"])
    at = None if snapshot is None else decode_token(head.headers["Stream-Snapshot-Offset"])
    return View(200, tail, closed, tuple(payloads), at, snapshot, below, earliest)


def stream_path(stream: str) -> str:
    """`/v1/stream/{stream}` for the default bucket's, `/{bucket}/{id}` for `{bucket}/{id}`."""
    return f"/{stream}" if "/" in stream else f"/v1/stream/{stream}"


def bootstrap_of(stream: str, answer: Answer, invoked: float, done: float) -> Bootstrap | None:
    """What a `/bootstrap` answered, or None if it was not answered in full (an error, or a
    body cut short: the client saw a failed request)."""
    if answer.status != 200:
        return None
    parts = multipart(answer.body, answer.headers["Content-Type"].partition("boundary=")[2])
    if parts is None:
        return None
    at = answer.headers["Stream-Snapshot-Offset"]
    payloads: list[str] = []
    for part in parts[1:]:
        found = json.loads(part)
        payloads += [str(m["p"]) for m in (found if isinstance(found, list) else [found])]
    snapshot = None if at == "-1" else decode_token(at)
    tail = decode_token(answer.headers["Stream-Next-Offset"])
    body = None if snapshot is None else parts[0].decode()
    return Bootstrap(stream, snapshot, body, tail, tuple(payloads), invoked, done)


def multipart(body: bytes, boundary: str) -> list[bytes] | None:
    """The part bodies of a `multipart/mixed` body (RFC 2046), or None if it is cut short."""
    delimiter = b"\r\n--" + boundary.encode()
    end = delimiter + b"--\r\n"
    if not body.endswith(end) or not body.startswith(delimiter[2:] + b"\r\n"):
        return None
    inner = b"\r\n" + body[: -len(end)]
    return [piece.partition(b"\r\n\r\n")[2] for piece in inner.split(delimiter + b"\r\n")[1:]]


Worker = Callable[[], Awaitable[None]]
