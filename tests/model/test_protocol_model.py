"""The protocol's model-based test: random sequences of every operation (buckets with and
without age retention, text and JSON streams, appends plain, idempotent and retried,
conditional and fenced, forks within and across buckets, trims, snapshots, fences, deletions,
tier and retention passes, an instance restarted, killed with `kill -9` or paused past its
session while a write goes through its peer, reads of every kind, `/bootstrap`, bucket
listings followed page by page, the console's seek and record list) on a real deployment of
two instances (one of them tracing every request into a real collector), each step checked
against the reference model (`tests/model/reference.py`): every acknowledged message reads
back byte-exact at its offset until a trim, snapshot or retention covers it, then 410 with
`Stream-Earliest-Offset`; a bucket's listing names its live streams, each at its tail; no 5xx
but a 503 while a slot changes owner; no process exits.

`make test` runs a small derandomized budget; `make model SEED=s EXAMPLES=n` runs longer.
Shrunk failures are replayed below as plain tests."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email import message_from_bytes
from email.policy import HTTP
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from adapter.settings import Settings
from devstack.jaeger import JaegerNode
from devstack.secure_kafka import SecureKafka
from tests.adapter_process import SCRIPT
from tests.certificates import fresh_status, presented_serial
from tests.cluster import SLOTS
from tests.identity_provider import IdentityProvider
from tests.model import listings
from tests.model.deployment import (
    PASS_INTERVAL_MS,
    Instance,
    Reply,
    model_env,
    ownership,
    settle,
)
from tests.model.kafka_access import Access, kafka_credential
from tests.model.listings import PAGE_SIZES
from tests.model.reference import (
    AGES,
    Bucket,
    Message,
    Model,
    Retention,
    Stream,
    decoded,
    joined,
    starts_at,
    time_range,
)
from tests.model.secret_files import SecretFiles
from tests.services import S3Server
from topology.acls import instance_grants
from topology.slots import SlotMap

pytestmark = pytest.mark.integration

# Shapes of known defects the random model steers clear of, so that this test stays green
# while they are open; each gets a regression test below marked xfail(strict=True). Once a
# fix lands, remove its name here and that test's xfail mark. None is open today; the tests
# below replay the shapes of the defects the model found and were fixed.
KNOWN_DEFECTS: frozenset[str] = frozenset()
if "MODEL_KNOWN_DEFECTS" in os.environ:  # another set for one run (empty: avoid nothing)
    KNOWN_DEFECTS = frozenset(os.environ["MODEL_KNOWN_DEFECTS"].split())

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "3"))
STEPS = int(os.environ.get("MODEL_STEPS", "20"))  # with the last check's wait: ~75 s
SEEDED = bool(os.environ.get("MODEL_SEED"))  # `make model SEED=s`: --hypothesis-seed=s
PAUSE_S = 8.0  # past the owners' session (tests/cluster.py: 6 s)
MAX_RESTARTS = int(os.environ.get("MODEL_RESTARTS", "1"))  # per example: each costs seconds
LAG_S = 10.0  # how long an instance may take to show another's write (its follower)
# How long a listing that names a bucket's streams may name an earlier tail of one: not at all
# (its first answer naming the streams the model holds names their tails). An instance that
# does not write a stream carries it forward over its records as of the listing; where the
# owner's tier pass or retention freed records past the tail it knew, from the tails the meta
# topic shows once followed to now, scanning from no lower than the partition's log start.
# Without the carrying forward, it names the tail of the owner's latest checkpoint (up to
# `slot_checkpoint_ms`); without the following, the tail it knew until its follower applies
# that checkpoint (0.1 to 0.3 s seen); without the floor, that checkpoint's tail wherever
# another stream of the page (a quiet one) has its tail below the log start.
TAIL_LAG_S = 0.0
BUCKETS = 4  # more than the start's streams fill: some topics begin empty
EMPTIEST = -1  # a slot argument naming the bucket whose topic holds the fewest streams
SLOT = st.one_of(st.just(EMPTIEST), st.integers(0, BUCKETS - 1))  # EMPTIEST half the time
LISTED = 50  # records the console's list is asked for at once
CONSOLE_MAX_LAST = 3  # the deployment's `console_max_last` (tests/model/deployment.py)
REFETCH_S = 10.5  # an unknown kid fetches the JWKS at most once per 10 s on each instance
# After a pass fails, the next runs up to 32 intervals later (adapter/service/tiering.py
# MAX_BACKOFF): the last check waits that long, so what a late pass does is seen.
LATE_PASS_S = 32 * PASS_INTERVAL_MS / 1000 + 0.5
NAMES = ("a", "b", "c", "d")
SUB_RESOURCES = tuple(
    sub
    for sub in ("fence", "trim", "snapshot", "bootstrap")
    if not (sub == "trim" and "flat_trim_path_creatable" in KNOWN_DEFECTS)
)
APPENDS = ("plain", "idempotent", "if_match", "stale_if_match", "wrong_token")
READS = ("all", "offset", "now", "at", "bounded")
TEXT, JSON = "text/plain", "application/json"
# The start's first choice is hypothesis's simplest: every bucket with age retention that cuts
# nothing in a run (600 s), so retention passes meet forks across buckets from the first
# sequence on; then none, then short.
START_RETENTIONS: list[Retention] = ["long", "none", "short"]
ALWAYS_ACT = ("passes", "restart", "finalize")  # rules that act without a request
# Each sequence's `slot_checkpoint_ms` of `a` and of `b` (restarted for one they do not have).
# The first, the deployment's own at its start and hypothesis's simplest (so every sequence
# of the bounded run): `a` writes its slots' checkpoints every 100 ms, `b` none within a
# sequence, so a new owner of `b`'s slots after a `kill -9` carries every stream forward from
# the data log alone (a clean stop writes its slots' state at the hand-over); then the other
# way round, and the default on both.
SLOT_CHECKPOINTS: tuple[tuple[int, int], ...] = (
    (100, 600_000),
    (600_000, 100),
    (Settings().slot_checkpoint_ms,) * 2,
)
SLOT_CHECKPOINT_ENV = "DURABLE_KAFKA_SLOT_CHECKPOINT_MS"

# The arguments of the rules drawn twice as often as the others (`ProtocolDriver`'s weights).
CREATE_STREAM: dict[str, st.SearchStrategy[Any]] = {
    "slot": SLOT,
    "name": st.sampled_from(NAMES),
    "is_json": st.booleans(),
    "which": st.integers(0, 1),
    "flat": st.booleans(),
    "appends": st.integers(0, 2),
}
FORK: dict[str, st.SearchStrategy[Any]] = {
    "pick": st.integers(0, 1000),
    "slot": SLOT,
    "name": st.sampled_from(NAMES),
    "at": st.integers(-2, 1000),
    "which": st.integers(0, 1),
    "flat": st.booleans(),
}
APPEND: dict[str, st.SearchStrategy[Any]] = {
    "pick": st.integers(0, 1000),
    "kind": st.sampled_from(APPENDS),
    "size": st.integers(0, 300),
    "which": st.integers(0, 1),
    "flat": st.booleans(),
    "times": st.integers(1, 4),
}


def recorded(method: Callable[..., None]) -> Callable[..., None]:
    """A rule that notes its call in `steps`, and on failure adds the sequence so far to the
    exception, as `replay` takes it: a failing run can be replayed even where hypothesis
    cannot shrink it (the deployment answers with its own timing)."""

    @functools.wraps(method)
    def run(self: ProtocolDriver, **arguments: Any) -> None:
        self.steps.append((method.__name__, arguments))
        sent = sum(instance.sent for instance in self.instances)
        try:
            method(self, **arguments)
        except BaseException as error:
            error.add_note(f"steps: {self.steps!r}")
            raise
        if method.__name__ not in ALWAYS_ACT and sent == sum(i.sent for i in self.instances):
            self.steps.pop()  # it did nothing (no stream or bucket to act on): not worth replaying

    return run


def weighted(
    arguments: dict[str, st.SearchStrategy[Any]],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`rule(**arguments)`, for the rules registered twice (hypothesis's overloads cannot
    tell that a dict of strategies holds no `target`)."""
    return rule(**arguments)  # type: ignore[call-overload,no-any-return]


class Mismatch(AssertionError):
    """An answer the model does not allow."""


@dataclass(frozen=True)
class Read:
    """A catch-up read followed to the tail: 200 and the value, or the first other answer."""

    status: int
    value: Any = None
    reply: Reply | None = None
    pages: int = 0

    @property
    def earliest(self) -> str | None:
        return None if self.reply is None else self.reply.header("Stream-Earliest-Offset")


def _answers(instance: Instance, headers: dict[str, str], status: int) -> str | None:
    """None if `GET /ui/api/buckets` with `headers` answers `status`, else what it answered."""
    reply = instance.request("GET", "/ui/api/buckets", headers)
    return None if reply.status == status else f"{reply.status}, not {status}"


def _certified(instance: Instance, client: ssl.SSLContext, status: int) -> str | None:
    """None if `GET /ui/api/buckets` with no token, on a new connection presenting `client`'s
    certificate, answers `status` (0: the handshake refused it)."""
    shown = fresh_status(instance.port, client, "/ui/api/buckets")
    return None if shown == status else f"{shown}, not {status}"


def _logged(instance: Instance, line: str) -> int:
    """How many times `instance` has logged `line` (a credential it took up)."""
    return instance.log.read_text().count(line)


def _logged_more(instance: Instance, line: str, before: int) -> str | None:
    logged = _logged(instance, line)
    return None if logged > before else f"{logged} times {line!r}, as before"


def _serves(instance: Instance, serial: int) -> str | None:
    """None if a new TLS connection to `instance` is shown the certificate `serial`."""
    assert instance.tls is not None
    shown = presented_serial(instance.port, instance.tls)
    return None if shown == serial else f"serial {shown:x}, not {serial:x}"


def eventually(check: Callable[[], str | None], what: str) -> None:
    """`check()` again until it finds nothing wrong: an instance that does not own a stream
    shows another's writes once its follower has applied them."""
    deadline = time.monotonic() + LAG_S
    while True:
        problem = check()
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise Mismatch(f"{what}: {problem}")
        time.sleep(0.1)


@dataclass
class Deployment:
    instances: list[Instance]
    prefix: str
    identity: IdentityProvider | SecretFiles  # what the clients' credentials come from
    env: dict[str, str]  # the instances' settings, which the command line tools take too
    collector: JaegerNode  # where instance `a` sends its spans
    traced: str  # `a`'s service name there


class ProtocolDriver(RuleBasedStateMachine):
    """Drives the deployment at random; after each step compares it with the `Model`."""

    def __init__(
        self,
        deployment: Deployment,
        avoid: frozenset[str] = KNOWN_DEFECTS,
        run: str | None = None,
        late_pass_s: float = LATE_PASS_S,
    ) -> None:
        super().__init__()
        self.late_pass_s = late_pass_s  # how long the last check waits for a late pass
        self.avoid = avoid  # the known defects whose shapes the rules steer clear of
        self.instances = deployment.instances
        self.deployment = deployment
        self.model = Model()
        self.run = run or uuid.uuid4().hex[:6]  # names this sequence's buckets
        self.counter = 0
        self.restarts = 0
        self.finalized = False
        self.touched: list[Stream] = []
        self.steps: list[tuple[str, dict[str, Any]]] = []
        for instance in self.instances:
            instance.assert_alive()

    # -- naming and picking ------------------------------------------------------------------

    def bucket_name(self, slot: int) -> str:
        return f"m{self.run}-{slot}"

    def path(self, stream: Stream, flat: bool = False) -> str:
        return f"{'/v1/stream' if flat else ''}/{stream.bucket}/{stream.name}"

    def pick(self, pick: int) -> Stream | None:
        live = self.model.live()
        return live[pick % len(live)] if live else None

    def slot_of(self, slot: int) -> int:
        """`slot`, or for `EMPTIEST` the existing bucket whose topic holds the records of the
        fewest streams (a topic's first stream, after only forks of other buckets' streams
        named it, is where its floors and tier ranges start): random slots seldom reach that
        shape twice in a row."""
        if slot != EMPTIEST:
            return slot
        held = {s: self.model.held_in(self.bucket_name(s)) for s in range(BUCKETS)}
        existing = [s for s in range(BUCKETS) if self.bucket_name(s) in self.model.buckets]
        return min(existing or range(BUCKETS), key=lambda s: held[s])

    def via(self, which: int) -> Instance:
        return self.instances[which % len(self.instances)]

    def other(self, instance: Instance) -> Instance:
        return next(i for i in self.instances if i is not instance)

    def next_value(self, stream: Stream, size: int) -> tuple[Any, bytes]:
        self.counter += 1
        if stream.is_json:
            value = {"n": self.counter, "pad": "j" * size}
            return value, json.dumps(value).encode()
        data = f"<{stream.name}{self.counter}>".encode() + b"t" * size
        return data, data

    def writer_headers(self, stream: Stream) -> dict[str, str]:
        headers = {"Content-Type": JSON if stream.is_json else TEXT}
        if stream.fence is not None:
            headers["Stream-Fencing-Token"] = stream.fence
        return headers

    # -- the start: every bucket, a text and a JSON stream -----------------------------------

    @initialize(
        retentions=st.lists(st.sampled_from(START_RETENTIONS), min_size=BUCKETS, max_size=BUCKETS),
        home=st.integers(0, BUCKETS - 1),
        appends=st.tuples(st.integers(1, 2), st.integers(0, 2)),
        checkpoints=st.sampled_from(SLOT_CHECKPOINTS),
    )
    def start(
        self,
        retentions: list[Retention],
        home: int,
        appends: tuple[int, int] = (1, 0),
        checkpoints: tuple[int, int] = SLOT_CHECKPOINTS[0],
    ) -> None:
        """Sequences begin with something to act on, so that few steps reach far: the
        instances' slot checkpoint intervals; every bucket; a text and a JSON stream with a few
        messages in one of them (cuts cross streams from the first step; the rules spread the
        others); a fork of the later into the bucket whose topic holds the fewest streams (a
        fork across buckets, its history past the start of another topic); and a tier and
        retention pass over them."""
        with self.noted():
            self.checkpoint_every(checkpoints)
            for slot, retention in enumerate(retentions):
                self.create_bucket(slot=slot, retention=retention, which=slot)
            for is_json, count in zip((False, True), appends, strict=True):
                self.create_stream(
                    slot=home,
                    name=NAMES[is_json],
                    is_json=is_json,
                    which=0,
                    flat=False,
                    appends=count,
                )
            self.fork(pick=1, slot=EMPTIEST, name="c", at=-2, which=1, flat=False)
            self.passes()

    def checkpoint_every(self, checkpoints: tuple[int, int]) -> None:
        """Each instance writes its slots' checkpoints every `checkpoints[i]` ms: restarted
        gently with it, one after the other, if it had another (it keeps it for the next
        sequences until one draws another)."""
        for instance, interval in zip(self.instances, checkpoints, strict=True):
            if instance.env[SLOT_CHECKPOINT_ENV] != str(interval):
                instance.env[SLOT_CHECKPOINT_ENV] = str(interval)
                instance.stop(hard=False)
                instance.start()
                settle(self.instances)

    # -- buckets -----------------------------------------------------------------------------

    @rule(
        slot=st.integers(0, BUCKETS - 1),
        retention=st.sampled_from(["none", "short", "long"]),
        which=st.integers(0, 1),
    )
    @recorded
    def create_bucket(self, slot: int, retention: Retention, which: int) -> None:
        name = self.bucket_name(slot)
        if name not in self.model.buckets:
            self.put_bucket(name, retention, which)

    def put_bucket(self, name: str, retention: Retention, which: int) -> None:
        age = AGES[retention]
        body = b"" if age is None else json.dumps({"retention": {"max_age_ms": age}}).encode()
        headers = {} if age is None else {"Content-Type": JSON}
        reply = self.via(which).request("PUT", f"/{name}", headers, body)
        expect(reply, {201}, f"PUT /{name}")
        self.model.buckets[name] = Bucket(name, retention)

    @rule(
        slot=st.integers(0, BUCKETS - 1),
        retention=st.sampled_from(["none", "short", "long"]),
        which=st.integers(0, 1),
    )
    @recorded
    def recreate_bucket(self, slot: int, retention: Retention, which: int) -> None:
        """An empty bucket deleted and at once created again with another retention, or
        none: the new bucket's settings are its own (operations, "Age retention": a bucket
        without `retention` keeps everything), so nothing of the old one's retention cuts
        the streams created in it afterwards."""
        name = self.bucket_name(slot)
        bucket = self.model.buckets.get(name)
        if bucket is None or bucket.retention == retention:
            return
        if not self.model.bucket_deletable(name):
            return
        expect(self.via(which).request("DELETE", f"/{name}"), {204}, f"DELETE /{name}")
        self.model.delete_bucket(name)
        self.put_bucket(name, retention, 1 - which)

    @rule(slot=st.integers(0, BUCKETS - 1), which=st.integers(0, 1))
    @recorded
    def delete_bucket(self, slot: int, which: int) -> None:
        name = self.bucket_name(slot)
        if name not in self.model.buckets:
            return
        deletable = self.model.bucket_deletable(name)
        if not deletable and "bucket_delete_races_stream_creation" in self.avoid:
            return
        reply = self.via(which).request("DELETE", f"/{name}")
        if deletable:
            expect(reply, {204}, f"DELETE /{name}")
            self.model.delete_bucket(name)
        else:
            expect(reply, {409}, f"DELETE /{name} (not empty)", "bucket_not_empty")

    # -- streams -----------------------------------------------------------------------------

    @weighted(CREATE_STREAM)
    @recorded
    def create_stream(
        self, slot: int, name: str, is_json: bool, which: int, flat: bool, appends: int = 0
    ) -> None:
        """A stream, and `appends` plain appends to it at once (a new stream's first records
        land while what its bucket's topic held before it is still fresh: floors, ranges)."""
        bucket = self.bucket_name(self.slot_of(slot))
        if bucket not in self.model.buckets:
            return
        if (
            "tiering_frees_a_housed_fork_bucket" in self.avoid
            and self.model.buckets[bucket].housed_cross_fork
        ):
            return
        existing = self.model.streams.get((bucket, name))
        if existing is not None and existing.state == "live":
            return
        path = f"{'/v1/stream' if flat else ''}/{bucket}/{name}"
        headers = {"Content-Type": JSON if is_json else TEXT}
        sent = _now()
        reply = self.via(which).request("PUT", path, headers)
        if existing is not None:  # soft-deleted: its id is not creatable
            expect(reply, {409}, f"PUT {path} (soft-deleted)")
            return
        expect(reply, {201}, f"PUT {path}")
        stream = self.model.create(bucket, name, is_json, _next(reply))
        stream.etag, stream.created_within = reply.header("ETag"), (sent, _now())
        self.touched.append(stream)
        for _ in range(appends):
            self.append_to(stream, "plain", 40, which, flat)

    @weighted(FORK)
    @recorded
    def fork(self, pick: int, slot: int, name: str, at: int, which: int, flat: bool) -> None:
        """A fork at the source's tail (`at` -2), at `-1`, or after `at` of its messages."""
        source, bucket = self.pick(pick), self.bucket_name(self.slot_of(slot))
        if source is None or bucket not in self.model.buckets or self.avoided_fork(source, bucket):
            return
        existing = self.model.streams.get((bucket, name))
        if existing is not None and existing.state == "live":
            return
        inherited = len(source.messages) if at == -2 else max(at, 0) % (len(source.messages) + 1)
        headers = {
            "Content-Type": JSON if source.is_json else TEXT,
            "Stream-Forked-From": self.path(source, flat),
        }
        if at != -2:
            headers["Stream-Fork-Offset"] = "-1" if at == -1 else source.boundaries[inherited]
        path = f"{'/v1/stream' if flat else ''}/{bucket}/{name}"
        lo, hi = self.model.earliest_range(source, _now())
        sent = _now()
        reply = self.via(which).request("PUT", path, headers)
        acked = _now()
        what = f"PUT {path} forked from {self.path(source)} after {inherited} messages"
        if existing is not None:
            expect(reply, {409}, f"{what} (its id soft-deleted)")
            return
        maybe_gone = self.model.may_cut(source) and inherited <= hi
        if maybe_gone and reply.status == 410:
            self.check_gone(source, reply, lo, hi, what)
            return
        if inherited < lo:
            expect(reply, {410}, f"{what} (below the source's earliest offset)", "offset_gone")
        expect(reply, {201}, what)
        if inherited and _next(reply) < source.boundaries[inherited]:
            raise Mismatch(f"{what}: its tail {_next(reply)} is below the fork offset")
        fork = self.model.fork(source, bucket, name, inherited, _next(reply), _now())
        fork.created_within = (sent, acked)
        self.touched.append(fork)

    def avoided_fork(self, source: Stream, bucket: str) -> bool:
        """Whether this fork takes a shape of a known defect."""
        across = source.home != bucket
        return across and (
            (
                "tiering_frees_a_housed_fork_bucket" in self.avoid
                and self.model.has_own_streams(bucket)
            )
            or (
                "retention_cuts_a_cross_bucket_fork" in self.avoid
                and self.model.buckets[bucket].retention != "none"
            )
        )

    @rule(pick=st.integers(0, 1000), which=st.integers(0, 1), flat=st.booleans())
    @recorded
    def delete_stream(self, pick: int, which: int, flat: bool) -> None:
        stream = self.pick(pick)
        if stream is None:
            return
        path = self.path(stream, flat)
        expect(self.via(which).request("DELETE", path), {204}, f"DELETE {path}")
        self.model.delete(stream)
        want = 410 if stream.state == "soft" else 404
        for instance in self.instances:
            eventually(
                _status_of(instance, f"{path}?offset=-1", want),
                f"GET {path} via {instance.name} after its deletion",
            )

    @rule(
        pick=st.integers(0, 1000),
        sub=st.sampled_from(SUB_RESOURCES),
        which=st.integers(0, 1),
    )
    @recorded
    def create_at_sub_resource(self, pick: int, sub: str, which: int) -> None:
        """`/v1/stream/{bucket}/{stream}/{sub}` names a sub-resource of the stream: no
        stream can be created there (it could never be read or appended to)."""
        stream = self.pick(pick)
        if stream is None:
            return
        path = f"{self.path(stream, flat=True)}/{sub}"
        reply = self.via(which).request("PUT", path, {"Content-Type": TEXT})
        if not 400 <= reply.status < 500:
            raise Mismatch(f"PUT {path}: {reply.status}, a stream at a sub-resource's URL")
        self.touched.append(stream)

    # -- writes ------------------------------------------------------------------------------

    @weighted(APPEND)
    @recorded
    def append(
        self, pick: int, kind: str, size: int, which: int, flat: bool, times: int = 1
    ) -> None:
        """`times` appends of one kind (offsets grow quickly: cuts and floors then cross
        other streams' records)."""
        for _ in range(times):
            self.append_once(pick, kind, size, which, flat)

    def append_once(self, pick: int, kind: str, size: int, which: int, flat: bool) -> None:
        stream = self.pick(pick)
        if stream is not None:
            self.append_to(stream, kind, size, which, flat)

    def append_to(self, stream: Stream, kind: str, size: int, which: int, flat: bool) -> None:
        path, via = self.path(stream, flat), self.via(which)
        value, body = self.next_value(stream, size)
        headers = self.writer_headers(stream)
        if kind == "wrong_token":
            headers.pop("Stream-Fencing-Token", None)
            if stream.fence is None:
                kind = "plain"
            else:
                reply = via.request("POST", path, headers, body)
                expect(
                    reply, {412}, f"POST {path} without its fencing token", "fencing_token_mismatch"
                )
                return
        if kind == "stale_if_match" and stream.stale_etag is not None:
            reply = via.request("POST", path, headers | {"If-Match": stream.stale_etag}, body)
            expect(reply, {412}, f"POST {path} with a stale If-Match", "precondition_failed")
            return
        retention = self.model.buckets[stream.bucket].retention
        if kind == "if_match" and stream.etag is not None and retention != "short":
            headers["If-Match"] = stream.etag
        if kind == "idempotent":
            headers |= {
                "Producer-Id": f"p-{self.run}",
                "Producer-Epoch": "0",
                "Producer-Seq": str(stream.producer_seq),
            }
        sent = _now()
        reply = via.request("POST", path, headers, body)
        expect(reply, {200, 204}, f"POST {path} ({kind})")
        acked = _now()
        if kind == "idempotent":  # the producer's retry of the same append: a duplicate
            again = via.request("POST", path, headers, body)
            expect(again, {200, 204}, f"POST {path} retried (seq {stream.producer_seq})")
            stream.producer_seq += 1
        stream.appended(Message(value, _next(reply), sent, acked))
        stream.stale_etag, stream.etag = stream.etag, reply.header("ETag")
        self.touched.append(stream)

    @rule(pick=st.integers(0, 1000), token=st.integers(0, 3), which=st.integers(0, 1))
    @recorded
    def fence(self, pick: int, token: int, which: int) -> None:
        stream = self.pick(pick)
        if stream is None:
            return
        path = f"{self.path(stream)}/fence"
        headers = {"Stream-Fencing-Token": f"tok-{token}"}
        expect(self.via(which).request("POST", path, headers), {204}, f"POST {path}")
        stream.fence, stream.etag = f"tok-{token}", None
        self.touched.append(stream)

    @rule(
        pick=st.integers(0, 1000),
        index=st.integers(0, 1000),
        by_time=st.booleans(),
        which=st.integers(0, 1),
    )
    @recorded
    def trim(self, pick: int, index: int, by_time: bool, which: int) -> None:
        """Below the offset after `index` messages, or below the first message at or after
        the moment `index` messages were sent."""
        stream = self.pick(pick)
        if stream is None:
            return
        count = len(stream.messages)
        index %= count + 1
        if by_time and count:
            moment = int(stream.messages[index % count].sent_ms)
            kmin, kmax = time_range(stream, moment)
            body: dict[str, Any] = {"at": moment}
        else:
            kmin = kmax = index
            body = {"before": stream.boundaries[index]}
        path = f"{self.path(stream)}/trim"
        lo, hi = self.model.earliest_range(stream, _now())
        reply = self.via(which).request(
            "POST", path, {"Content-Type": JSON}, json.dumps(body).encode()
        )
        expect(reply, {204}, f"POST {path} {body}")
        earliest = reply.header("Stream-Earliest-Offset")
        if earliest is None:
            raise Mismatch(f"POST {path}: no Stream-Earliest-Offset")
        cut = stream.count_below(earliest)
        lo, hi = max(lo, kmin), max(hi, kmax, self.model.earliest_range(stream, _now())[1])
        if not lo <= cut <= hi:
            raise Mismatch(
                f"POST {path} {body}: earliest after {cut} messages, not in [{lo}, {hi}]"
            )
        self.model.cut(stream, earliest)
        self.touched.append(stream)

    @rule(pick=st.integers(0, 1000), index=st.integers(0, 1000), which=st.integers(0, 1))
    @recorded
    def snapshot(self, pick: int, index: int, which: int) -> None:
        stream = self.pick(pick)
        if stream is None:
            return
        index %= len(stream.messages) + 1
        self.counter += 1
        blob = f"state-{self.counter}".encode()
        path = f"{self.path(stream)}/snapshot/{stream.boundaries[index]}"
        lo, hi = self.model.earliest_range(stream, _now())
        reply = self.via(which).request(
            "PUT", path, {"Content-Type": "application/octet-stream"}, blob
        )
        if self.model.may_cut(stream) and index <= hi and reply.status == 410:
            self.check_gone(stream, reply, lo, hi, f"PUT {path}")
            return
        if index < lo:
            expect(reply, {409, 410}, f"PUT {path} (below the earliest offset)")
            return
        expect(reply, {204}, f"PUT {path}")
        self.model.cut(stream, stream.boundaries[index])
        stream.snapshot = (index, blob)
        self.touched.append(stream)

    # -- the deployment ----------------------------------------------------------------------

    @rule()
    @recorded
    def passes(self) -> None:
        """Let every instance run tier and age-retention passes, then check every stream."""
        time.sleep(3 * PASS_INTERVAL_MS / 1000)
        self.check_all()

    @precondition(lambda self: self.restarts < MAX_RESTARTS)
    @rule(which=st.integers(0, 1), hard=st.booleans())
    @recorded
    def restart(self, which: int, hard: bool) -> None:
        """Stop an instance (SIGTERM, or `kill -9`) and start it again on the same port."""
        self.restarts += 1
        instance = self.via(which)
        instance.stop(hard)
        instance.start()
        settle(self.instances)
        self.check_all()

    @precondition(lambda self: self.restarts < MAX_RESTARTS)
    @rule(which=st.integers(0, 1), pick=st.integers(0, 1000), flat=st.booleans())
    @recorded
    def pause(self, which: int, pick: int, flat: bool) -> None:
        """An instance stopped (SIGSTOP) past the owners' session while an append goes
        through the other, which forwards it to the paused owner if its stream is there: the
        paused one is removed (its forwards unanswered for `owner_unanswered_ms`, or its
        session over) and the append goes through the new owner. Then resumed (SIGCONT): the
        paused one finds itself fenced and writes nothing of what it held."""
        self.restarts += 1
        paused, other = self.via(which), self.via(which + 1)
        paused.pause()
        try:
            started = time.monotonic()
            self.append_once(pick, "plain", 8, which + 1, flat)
            time.sleep(max(0.0, PAUSE_S - (time.monotonic() - started)))
        finally:
            paused.resume()
        other.assert_alive()
        settle(self.instances)
        self.check_all()

    @rule(which=st.integers(0, 1))
    @recorded
    def rotate_key(self, which: int) -> None:
        """The clients' credentials rotate. With an identity provider, it signs with a new key,
        published beside the previous one: a token naming the new `kid` is let in at once by
        each instance, which fetches the set for a kid it lacks (operations, "jwt": at most
        once per 10 s, so rotations are at least that far apart here: a rotation sooner does
        nothing, rather than a precondition on the clock, which hypothesis could not replay).
        With secrets from files, a new token and a new client CA are listed beside the old
        ones, a new HTTPS certificate written over the served one and the Kafka credential
        rotated (a new password, on the broker then in the client file; or a client
        certificate of a new CA the broker trusts beside the old one): each instance lets the
        token and a client certificate of the new CA in, shows the certificate to a new
        connection and takes the Kafka credential up (it logs the new password's reload, or
        the Kafka clients' renewal with the new certificate) once it has read the files again
        (`secret_poll_ms`); once the old token and CA are removed from the files (and the
        broker trusts the new Kafka client CA alone), it refuses the token with 401 and a
        certificate of the old CA in the handshake, and appends through both instances and
        reads through both go on. `/ui/api/buckets` takes any valid token with `read:*`."""
        credentials = self.deployment.identity
        if isinstance(credentials, SecretFiles):
            self._rotate_secrets(credentials, which)
            return
        if time.monotonic() - credentials.rotated_at < REFETCH_S:
            return
        credentials.rotate()
        for instance in (self.via(which), self.via(which + 1)):
            reply = instance.request("GET", "/ui/api/buckets")
            expect(reply, {200}, f"GET /ui/api/buckets via {instance.name}, a new key's token")

    def _rotate_secrets(self, files: SecretFiles, which: int) -> None:
        both = (self.via(which), self.via(which + 1))
        reloaded = files.kafka.reloaded
        reloads = [_logged(instance, reloaded) for instance in both]
        previous = files.rotate()
        for instance in both:
            eventually(
                functools.partial(_answers, instance, {}, 200),
                f"GET /ui/api/buckets via {instance.name}, a token just listed",
            )
            eventually(
                functools.partial(_serves, instance, files.serial),
                f"a new connection to {instance.name}, a certificate just issued",
            )
            eventually(
                functools.partial(_certified, instance, files.client, 200),
                f"GET /ui/api/buckets via {instance.name}, a client CA just listed",
            )
        for instance, before in zip(both, reloads, strict=True):
            eventually(
                functools.partial(_logged_more, instance, reloaded, before),
                f"{instance.name} taking up a new Kafka credential",
            )
        files.retire()
        for instance in both:
            eventually(
                functools.partial(_answers, instance, previous, 401),
                f"GET /ui/api/buckets via {instance.name}, a token just removed",
            )
            eventually(
                functools.partial(_certified, instance, files.former_client, 0),
                f"GET /ui/api/buckets via {instance.name}, a client CA just removed",
            )
        self.write_through_both(which)

    def write_through_both(self, which: int) -> None:
        """An append through each instance to a live stream (its owner's, or forwarded to it),
        then the stream read through each: once the broker refuses the former Kafka
        credential, every client an instance writes or reads with must hold the new one."""
        stream = self.pick(which)
        if stream is None:
            return
        for through in (which, which + 1):
            self.append_to(stream, "plain", 8, through, False)
        for instance in self.instances:
            self.check_stream(stream, instance)

    @precondition(lambda self: not self.finalized)
    @rule()
    @recorded
    def finalize(self) -> None:
        """`durable-kafka upgrade finalize` between steps: a deployment that began with the
        newest format level has it in force already (exit 0, "already"), and `upgrade status`
        says so, every member of the owners' group reading it (how-to/upgrades.md). Once a
        sequence: each tool replays the meta topic and describes the group (seconds)."""
        self.finalized = True
        done = upgrade(self.deployment, "finalize")
        if done.returncode != 0:
            raise Mismatch(f"upgrade finalize: exit {done.returncode}: {done.stderr[-500:]}")
        shown = upgrade(self.deployment, "status", "--json")
        if shown.returncode != 0:
            raise Mismatch(f"upgrade status: exit {shown.returncode}: {shown.stderr[-500:]}")
        standing = json.loads(shown.stdout)
        reads = {instance["reads"] for instance in standing["instances"]}
        if standing["in_force"] != standing["newest"] or reads != {standing["newest"]}:
            raise Mismatch(f"upgrade status after finalize: {standing}")

    # -- reads -------------------------------------------------------------------------------

    @rule(
        pick=st.integers(0, 1000),
        kind=st.sampled_from(READS),
        index=st.integers(0, 1000),
        which=st.integers(0, 1),
        flat=st.booleans(),
    )
    @recorded
    def read(self, pick: int, kind: str, index: int, which: int, flat: bool) -> None:
        stream, via = self.pick(pick), self.via(which)
        if stream is None:
            return
        index %= len(stream.messages) + 1
        checks: dict[str, Callable[[], str | None]] = {
            "all": lambda: self.problem_reading(stream, via, None, flat),
            "offset": lambda: self.problem_reading(stream, via, index, flat),
            "now": lambda: self.problem_at_now(stream, via, flat),
            "at": lambda: self.problem_at_time(stream, via, index, flat),
            "bounded": lambda: self.problem_bounded(stream, via, index, 1 + index % 3, flat),
        }
        eventually(checks[kind], f"{kind} read of {self.path(stream, flat)} via {via.name}")

    @rule(
        pick=st.integers(0, 1000),
        last=st.integers(1, CONSOLE_MAX_LAST + 2),
        which=st.integers(0, 1),
    )
    @recorded
    def console_seek(self, pick: int, last: int, which: int) -> None:
        """The console's seek to the last N messages (operations, `console_max_last`): the
        offset N messages before the tail, never below the earliest; N past the setting is
        400 `invalid_query`. Then its record list from the start: one record per message
        retained, in order, each of its message's size (from the cold tier where Kafka freed
        them)."""
        stream, via = self.pick(pick), self.via(which)
        if stream is None:
            return
        path = f"/ui/api/seek/{stream.bucket}/{stream.name}?last={last}"
        if last > CONSOLE_MAX_LAST:
            expect(via.request("GET", path), {400}, f"GET {path}", "invalid_query")
            return
        eventually(lambda: self.problem_seeking(stream, via, last), f"GET {path} via {via.name}")
        listing = f"/ui/api/records/{stream.bucket}/{stream.name}?offset=-1&limit={LISTED}"
        eventually(lambda: self.problem_listing(stream, via), f"GET {listing} via {via.name}")

    @rule(pick=st.integers(0, 1000), which=st.integers(0, 1))
    @recorded
    def bootstrap(self, pick: int, which: int) -> None:
        stream, via = self.pick(pick), self.via(which)
        if stream is None:
            return
        eventually(
            lambda: self.problem_bootstrapping(stream, via),
            f"GET {self.path(stream)}/bootstrap via {via.name}",
        )

    @rule(
        slot=SLOT,
        which=st.integers(0, 1),
        prefix=st.sampled_from(("", *NAMES[:2])),
        limit=st.sampled_from(PAGE_SIZES),
    )
    @recorded
    def list_bucket(self, slot: int, which: int, prefix: str, limit: int | None) -> None:
        """A bucket's listing through either instance, every page followed (pages of one or
        two streams sometimes), against the model: see `check_listing`."""
        bucket = self.bucket_name(self.slot_of(slot))
        if bucket in self.model.buckets:
            self.check_listing(bucket, self.via(which), prefix, limit)

    # -- weights: hypothesis draws among the enabled rules evenly; these rules are drawn twice
    # as often as the others, as most shapes worth finding are streams, forks and appends
    # meeting in one topic (the steps are recorded under the rule's own name) ---------------

    @weighted(CREATE_STREAM)
    def create_stream_more(self, **arguments: Any) -> None:
        self.create_stream(**arguments)

    @weighted(FORK)
    def fork_more(self, **arguments: Any) -> None:
        self.fork(**arguments)

    @weighted(APPEND)
    def append_more(self, **arguments: Any) -> None:
        self.append(**arguments)

    # -- checks ------------------------------------------------------------------------------

    @invariant()
    def after_each_step(self) -> None:
        """No instance exited; each stream the step touched is listed as the model says in
        its bucket through both instances, and read so through the instance the step did not
        use as often as the one it did. Listings first every other pair of steps, reads first
        in the others: either brings the asking instance's view of the stream up to date,
        which would hide what the other gets wrong."""
        with self.noted():
            for instance in self.instances:
                instance.assert_alive()
            touched = [stream for stream in dict.fromkeys(self.touched) if stream.state == "live"]
            via = self.instances[self.counter % 2]
            reads = [functools.partial(self.check_stream, stream, via) for stream in touched]
            listings = [
                functools.partial(self.check_listing, bucket, instance, "", None)
                for bucket in dict.fromkeys(stream.bucket for stream in touched)
                for instance in self.instances
                if bucket in self.model.buckets
            ]
            for check in (listings + reads) if self.counter // 2 % 2 else (reads + listings):
                check()
            self.touched.clear()

    @contextlib.contextmanager
    def noted(self) -> Iterator[None]:
        try:
            yield
        except BaseException as error:
            error.add_note(f"steps: {self.steps!r}")
            raise

    def check_all(self) -> None:
        via = self.instances[self.counter % 2]
        for bucket in self.model.buckets:
            self.check_listing(bucket, via, "", 2)
        for stream in self.model.live():
            self.check_stream(stream, via)

    def check_stream(self, stream: Stream, via: Instance) -> None:
        eventually(
            lambda: self.problem_reading(stream, via, None, False),
            f"GET {self.path(stream)}?offset=-1 via {via.name}",
        )

    def teardown(self) -> None:
        """Every bucket listed and every stream read through both instances, once more at
        the end, after the latest a pass retried after failures may run."""
        with self.noted():
            time.sleep(self.late_pass_s)
            for instance in self.instances:
                instance.assert_alive()
                for bucket in self.model.buckets:
                    self.check_listing(bucket, instance, "", 2)
            for instance in self.instances:
                for stream in self.model.live():
                    self.check_stream(stream, instance)

    def check_listing(self, bucket: str, via: Instance, prefix: str, limit: int | None) -> None:
        """The bucket's listing through `via` names exactly its live streams with `prefix`
        (as every check, once `via` shows the latest changes: a moment after another instance
        made them), and then each as the model knows it, at its tail (`listings.py`), written
        there or elsewhere, within `TAIL_LAG_S`."""
        streams = [
            stream
            for stream in self.model.in_bucket(bucket)
            if stream.state == "live" and stream.name.startswith(prefix)
        ]
        what = f"GET /{bucket}/streams?{listings.query(prefix, limit, None)} via {via.name}"
        named_at: list[float] = []  # when the listing first named the streams the model holds

        def check() -> str | None:
            named, said = listings.problems(via, bucket, prefix, limit, streams)
            if named is not None or said is None:
                return named
            named_at.append(time.monotonic())
            if named_at[-1] - named_at[0] >= TAIL_LAG_S:
                raise Mismatch(f"{what}: {said} for {TAIL_LAG_S} s")
            return said

        eventually(check, what)

    def catch_up(self, stream: Stream, via: Instance, query: dict[str, str], flat: bool) -> Read:
        """A read followed page by page to the tail (`Stream-Up-To-Date`). Up to date short of
        an append acknowledged before the read began is wrong at once, through either
        instance (read-your-writes), not a lag to wait out: an instance that cannot tell must
        leave the header out or answer 503."""
        path, parts = self.path(stream, flat), []
        for page in range(500):
            reply = via.request("GET", f"{path}?{urlencode(query)}")
            if reply.status != 200:
                return Read(reply.status, reply=reply, pages=page)
            parts.append(decoded(stream, reply.body))
            if reply.header("Stream-Up-To-Date") == "true":
                if _next(reply) < stream.tail:
                    raise Mismatch(
                        f"GET {path} via {via.name}: Stream-Up-To-Date at {_next(reply)}, "
                        f"below the acknowledged tail {stream.tail}"
                    )
                return Read(200, joined(stream, parts), reply, page + 1)
            query = {"offset": _next(reply)}
        raise Mismatch(f"GET {path}: no end after 500 pages")

    def problem_reading(
        self, stream: Stream, via: Instance, start: int | None, flat: bool
    ) -> str | None:
        """What is wrong with a read from `-1` (`start` None) or after `start` messages."""
        lo, _ = self.model.earliest_range(stream, _now())
        offset = "-1" if start is None else stream.boundaries[start]
        got = self.catch_up(stream, via, {"offset": offset}, flat)
        if got.status == 410 and got.pages == 0:
            return self.problem_gone(stream, via, got, offset if start is not None else None, flat)
        if got.status != 200:
            return f"offset {offset}: {got.status} {got.reply and got.reply.body[:200]!r}"
        first = start or 0
        if first < lo:
            return f"offset {offset}: 200, but the first {lo} messages are gone"
        return _compare(stream, got.value, first, f"offset {offset}")

    def problem_gone(
        self, stream: Stream, via: Instance, got: Read, offset: str | None, flat: bool
    ) -> str | None:
        """A 410: allowed when a cut may have happened, its `Stream-Earliest-Offset` within
        the model's range and above the offset read; from there the stream reads whole."""
        earliest = got.earliest
        if earliest is None:
            return "410 without Stream-Earliest-Offset"
        if not self.model.may_cut(stream):
            return f"410 (earliest {earliest}) though nothing cut the stream"
        lo, hi = self.model.earliest_range(stream, _now())
        cut = stream.count_below(earliest)
        if not lo <= cut <= hi:
            return f"410: earliest {earliest} after {cut} messages, not in [{lo}, {hi}]"
        if offset is not None and earliest <= offset:
            return f"410 for offset {offset}, not below the earliest {earliest}"
        again = self.catch_up(stream, via, {"offset": earliest}, flat)
        if again.status != 200:
            return f"offset {earliest} (the earliest): {again.status}"
        self.model.seen_earliest(stream, earliest)
        return _compare(stream, again.value, cut, f"offset {earliest} (the earliest)")

    def problem_at_now(self, stream: Stream, via: Instance, flat: bool) -> str | None:
        reply = via.request("GET", f"{self.path(stream, flat)}?offset=now")
        if reply.status != 200 or decoded(stream, reply.body) not in (b"", []):
            return f"offset=now: {reply.status} {reply.body[:200]!r}"
        # At or past the tail: a stream shares its partition, so "now" may lie past its own
        # last record (nothing of it lies between).
        if _next(reply) < stream.tail:
            return f"offset=now: next offset {_next(reply)}, below the tail {stream.tail}"
        return None

    def problem_at_time(self, stream: Stream, via: Instance, index: int, flat: bool) -> str | None:
        """A read from the moment the message after `index` was sent (or a second after the
        last): from the first message at or after it, or 410 if that may be gone."""
        count = len(stream.messages)
        moment = int(stream.messages[index].sent_ms) if index < count else int(_now()) + 1000
        kmin, kmax = time_range(stream, moment)
        lo, hi = self.model.earliest_range(stream, _now())
        got = self.catch_up(stream, via, {"at": str(moment)}, flat)
        if got.status == 410 and got.pages == 0 and self.model.may_cut(stream) and kmin <= hi:
            return None
        if got.status != 200:
            return f"at={moment}: {got.status} {got.reply and got.reply.body[:200]!r}"
        if starts_at(stream, got.value, max(kmin, lo), kmax) is None:
            return f"at={moment}: {got.value!r:.300} is no suffix from [{max(kmin, lo)}, {kmax}]"
        return None

    def problem_bounded(
        self, stream: Stream, via: Instance, start: int, most: int, flat: bool
    ) -> str | None:
        offset = stream.boundaries[start]
        query = {"offset": offset, "max_messages": str(most)}
        reply = via.request("GET", f"{self.path(stream, flat)}?{urlencode(query)}")
        lo, hi = self.model.earliest_range(stream, _now())
        if reply.status == 410 and self.model.may_cut(stream) and start <= hi:
            return None
        if reply.status != 200 or start < lo:
            return f"{query}: {reply.status} (earliest within [{lo}, {hi}])"
        value = decoded(stream, reply.body)
        whole = reply.header("Stream-Up-To-Date") == "true"
        counts = [c for c in range(most + 1) if start + c <= len(stream.messages)]
        fits = [
            c
            for c in counts
            if stream.value_of(start, start + c) == value
            and (c > 0 or start == len(stream.messages) or not whole)
            and (not whole or start + c == len(stream.messages))
        ]
        return None if fits else f"{query}: {value!r:.300} is no run of at most {most} from {start}"

    def problem_seeking(self, stream: Stream, via: Instance, last: int) -> str | None:
        """The seek's offset reads as the last `last` messages, or from the earliest offset
        if fewer remain (or 410 there, if a cut may have moved it since)."""
        reply = via.request("GET", f"/ui/api/seek/{stream.bucket}/{stream.name}?last={last}")
        if reply.status != 200:
            return f"{reply.status} {reply.body[:200]!r}"
        offset = str(json.loads(reply.body)["offset"])
        lo, hi = self.model.earliest_range(stream, _now())
        first = max(len(stream.messages) - last, 0)
        got = self.catch_up(stream, via, {"offset": offset}, False)
        if got.status == 410 and self.model.may_cut(stream):
            return None
        if got.status != 200:
            return f"offset {offset} (sought): {got.status}"
        if starts_at(stream, got.value, max(first, lo), max(first, hi)) is None:
            return f"offset {offset}: {got.value!r:.300} is not the last {last} messages"
        return None

    def problem_listing(self, stream: Stream, via: Instance) -> str | None:
        """The records listed from the earliest offset are the retained messages' (of a text
        stream: their sizes; of a JSON one: how many)."""
        path = f"/ui/api/records/{stream.bucket}/{stream.name}?offset=-1&limit={LISTED}"
        reply = via.request("GET", path)
        if reply.status == 410 and self.model.may_cut(stream):
            return None
        if reply.status != 200:
            return f"{reply.status} {reply.body[:200]!r}"
        sizes = [int(record["bytes"]) for record in json.loads(reply.body)["records"]]
        lo, hi = self.model.earliest_range(stream, _now())
        for start in range(lo, hi + 1):
            retained = stream.messages[start : start + LISTED]
            if stream.is_json and len(sizes) == len(retained):
                return None
            if sizes == [len(message.value) for message in retained]:
                return None
        return f"sizes {sizes!r:.300} are no run of the messages from [{lo}, {hi}]"

    def problem_bootstrapping(self, stream: Stream, via: Instance) -> str | None:
        reply = via.request("GET", f"{self.path(stream)}/bootstrap")
        if reply.status != 200:
            return f"{reply.status} {reply.body[:200]!r}"
        lo, hi = self.model.earliest_range(stream, _now())
        if stream.is_json or stream.snapshot is None or (lo, hi) != (stream.snapshot[0],) * 2:
            return None  # only a text stream starting exactly at its snapshot is known whole
        covered, blob = stream.snapshot
        parts = _parts(reply)
        want = [blob, *(m.value for m in stream.messages[covered:])]
        if parts != want:
            return f"parts {parts!r:.300}, the model says {want!r:.300}"
        return None

    def check_gone(self, stream: Stream, reply: Reply, lo: int, hi: int, what: str) -> None:
        earliest = reply.header("Stream-Earliest-Offset")
        if earliest is None or not lo <= stream.count_below(earliest) <= hi:
            raise Mismatch(f"{what}: 410 with earliest {earliest}, not within [{lo}, {hi}]")
        self.model.seen_earliest(stream, earliest)


# -- helpers -------------------------------------------------------------------------------


def transaction_spans(deployment: Deployment, wait_s: float = 30.0) -> int:
    """How many `kafka transaction` spans of the traced instance the collector holds (after
    its batch export, within `wait_s`)."""
    query = urlencode(
        {"service": deployment.traced, "operation": "kafka transaction", "limit": "100"}
    )
    url = f"{deployment.collector.query_url}/api/traces?{query}"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                traces = json.loads(response.read())["data"] or []
        except urllib.error.HTTPError:
            traces = []  # 404: the service has sent nothing yet
        found = sum(
            1
            for trace in traces
            for span in trace["spans"]
            if span["operationName"] == "kafka transaction"
        )
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def upgrade(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    """`durable-kafka upgrade ...` with the instances' settings."""
    return subprocess.run(
        [SCRIPT, "upgrade", *args],
        env=os.environ | deployment.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def expect(reply: Reply, statuses: set[int], what: str, code: str | None = None) -> None:
    if reply.status not in statuses or (code is not None and reply.code() != code):
        want = f"{sorted(statuses)}{f' {code}' if code else ''}"
        raise Mismatch(f"{what}: {reply.status} {reply.body[:300]!r}, the model says {want}")


def _status_of(instance: Instance, path: str, status: int) -> Callable[[], str | None]:
    def check() -> str | None:
        reply = instance.request("GET", path)
        return None if reply.status == status else f"{reply.status}, the model says {status}"

    return check


def _next(reply: Reply) -> str:
    token = reply.header("Stream-Next-Offset")
    if token is None:
        raise Mismatch(f"{reply.status} without Stream-Next-Offset")
    return token


def _compare(stream: Stream, value: Any, first: int, what: str) -> str | None:
    want = stream.value_of(first)
    if value == want:
        return None
    return f"{what}: read {value!r:.400}, the model says {want!r:.400} (from message {first})"


def _parts(reply: Reply) -> list[bytes]:
    head = f"Content-Type: {reply.header('Content-Type')}\r\n\r\n".encode()
    message = message_from_bytes(head + reply.body, policy=HTTP)
    payloads = [part.get_payload(decode=True) for part in message.iter_parts()]
    return [part for part in payloads if isinstance(part, bytes)]


def _now() -> float:
    return time.time() * 1000


# -- the deployment and the tests ------------------------------------------------------------


@pytest.fixture(scope="module")
def deployment(
    kafka_bootstrap: str,
    s3: S3Server,
    jaeger: JaegerNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    """Two instances on one topic prefix, their slots split, the cold tier on MinIO, every
    request authenticated by a JWT of an identity provider of the test's own; `a` traces
    every request into a real collector, `b` traces nothing."""
    with contextlib.ExitStack() as stack:
        yield from start_deployment(stack, kafka_bootstrap, s3, jaeger, tmp_path_factory)


def start_deployment(
    stack: contextlib.ExitStack,
    kafka_bootstrap: str,
    s3: S3Server,
    jaeger: JaegerNode,
    tmp_path_factory: pytest.TempPathFactory,
    secured: SecureKafka | None = None,
    access: Access = "scram",
) -> Iterator[Deployment]:
    """With `secured` (a secured broker), the secrets come from files: the clients hold
    static tokens, the instances serve HTTPS and reach Kafka as a principal of their own,
    a SCRAM user or the subject of a client certificate as `access` says (`SecretFiles`);
    else the clients hold JWTs of an identity provider of the test's own."""
    tmp_path: Path = tmp_path_factory.mktemp("model")
    prefix = f"m{uuid.uuid4().hex[:10]}."
    identity: IdentityProvider | SecretFiles
    tls: ssl.SSLContext | None = None
    if secured is not None:
        user, folder = f"model-{prefix.strip('.')}", tmp_path / "secrets"
        folder.mkdir()
        kafka = kafka_credential(access, secured, user, folder)
        stack.callback(kafka.close)
        identity = SecretFiles(folder, kafka)
        secured.grant(user, instance_grants(prefix))
        tls = identity.trusting()
    else:
        identity = stack.enter_context(IdentityProvider().serving())
    env = model_env(kafka_bootstrap, prefix, tmp_path, s3) | identity.settings()
    traced = {
        "DURABLE_KAFKA_TRACING_ENDPOINT": jaeger.otlp_url,
        "DURABLE_KAFKA_TRACING_SERVICE_NAME": f"model-{prefix.strip('.')}",
    }
    a, b = ({SLOT_CHECKPOINT_ENV: str(ms)} for ms in SLOT_CHECKPOINTS[0])
    instances = [
        Instance("a", env | traced | a, tmp_path, identity.headers, tls),
        Instance("b", env | b, tmp_path, identity.headers, tls),
    ]
    try:
        for instance in instances:
            instance.start()
        settle(instances)
        service = traced["DURABLE_KAFKA_TRACING_SERVICE_NAME"]
        yield Deployment(instances, prefix, identity, env, jaeger, service)
    finally:
        for instance in instances:
            if instance.proc is not None and instance.proc.poll() is None:
                instance.stop(hard=False)


@pytest.mark.timeout(int(os.environ.get("MODEL_TIMEOUT_S", "600")))
def test_the_deployment_behaves_as_the_protocol_model(deployment: Deployment) -> None:
    drive(deployment, EXAMPLES)


def drive(deployment: Deployment, examples: int) -> None:
    """`examples` random sequences of `STEPS` steps, each compared with the model."""
    run_state_machine_as_test(  # type: ignore[no-untyped-call]
        lambda: ProtocolDriver(deployment),
        settings=settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=not SEEDED,
            database=None,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        ),
    )
    # Tracing was on in `a` all along: its writes' Kafka transactions reached the collector.
    assert transaction_spans(deployment) > 0


# -- shrunk failures, replayed ---------------------------------------------------------------


def replay(
    deployment: Deployment,
    steps: list[tuple[str, dict[str, Any]]],
    avoid: frozenset[str] = frozenset(),
    run: str | None = None,
) -> None:
    """Run `steps` (rule name, arguments) as hypothesis ran them: the invariant after each,
    the teardown at the end (at once: a replay waits where its steps say); no known defect's
    shape avoided unless `avoid` says so."""
    driver = ProtocolDriver(deployment, avoid, run, late_pass_s=0)
    for name, arguments in steps:
        getattr(driver, name)(**arguments)
        driver.after_each_step()
    driver.teardown()


def one_owner(deployment: Deployment, slots: range) -> str:
    """A `run` whose buckets of `slots` all have their write slot on one instance (which
    instance does a background pass's writes decides whether some defects show)."""
    owners = {
        int(slot): instance.name
        for instance in deployment.instances
        for slot in (ownership(instance) or {}).get("owned_slots") or {}
    }
    layout = SlotMap(deployment.prefix, SLOTS)
    for _ in range(1000):
        run = uuid.uuid4().hex[:6]
        found = {owners.get(layout.of_stream(f"m{run}-{slot}", 0)) for slot in slots}
        if len(found) == 1 and None not in found:
            return run
    raise AssertionError("no run of names has its buckets on one instance")


def _text_stream(slot: int, name: str) -> tuple[str, dict[str, Any]]:
    arguments = {"slot": slot, "name": name, "is_json": False, "which": 0, "flat": False}
    return ("create_stream", arguments)


def _append(pick: int, size: int, which: int = 0) -> tuple[str, dict[str, Any]]:
    arguments = {"pick": pick, "kind": "plain", "size": size, "which": which, "flat": False}
    return ("append", arguments)


def _bucket_step(slot: int, retention: Retention) -> tuple[str, dict[str, Any]]:
    return ("create_bucket", {"slot": slot, "retention": retention, "which": 0})


def test_tiering_keeps_the_own_streams_of_a_bucket_housing_a_fork(deployment: Deployment) -> None:
    replay(
        deployment,
        [
            _bucket_step(0, "none"),
            _bucket_step(1, "none"),
            _text_stream(0, "a"),  # records before the source's: its first offset is high
            *(_append(0, 40) for _ in range(8)),
            _text_stream(0, "b"),
            *(_append(1, 40) for _ in range(2)),
            ("fork", {"pick": 1, "slot": 1, "name": "c", "at": -2, "which": 0, "flat": False}),
            *(("passes", {}) for _ in range(5)),  # a tier pass while it houses only the fork
            _text_stream(1, "d"),  # its topic reaches the fork's offsets: they can be freed
            *(_append(3, 40) for _ in range(12)),
            *(("passes", {}) for _ in range(12)),  # past a failed pass's back-off (6.4 s)
        ],
        run=one_owner(deployment, range(2)),
    )


def test_age_retention_leaves_a_fresh_fork_of_another_buckets_stream_whole(
    deployment: Deployment,
) -> None:
    replay(
        deployment,
        [
            _bucket_step(0, "none"),
            _bucket_step(1, "long"),
            _text_stream(0, "a"),
            _append(0, 10),
            ("fork", {"pick": 0, "slot": 1, "name": "b", "at": -2, "which": 0, "flat": False}),
            ("passes", {}),
        ],
        run=one_owner(deployment, range(2)),
    )


def test_no_stream_is_created_at_a_flat_trim_url(deployment: Deployment) -> None:
    replay(
        deployment,
        [
            _bucket_step(0, "none"),
            _text_stream(0, "a"),
            ("create_at_sub_resource", {"pick": 0, "sub": "trim", "which": 1}),
        ],
    )


def test_a_bucket_with_a_stream_just_created_elsewhere_is_not_deleted(
    deployment: Deployment,
) -> None:
    for _ in range(16):
        replay(
            deployment,
            [
                _bucket_step(1, "none"),
                (
                    "create_stream",
                    {"slot": 1, "name": "c", "is_json": True, "which": 0, "flat": True},
                ),
                ("delete_bucket", {"slot": 1, "which": 1}),
            ],
        )


def test_the_consoles_seek_counts_back_into_the_cold_tier(deployment: Deployment) -> None:
    replay(
        deployment,
        [
            _bucket_step(0, "none"),
            _text_stream(0, "a"),
            *(_append(0, 200) for _ in range(6)),  # past the 256-byte hot window: tiered
            *(("passes", {}) for _ in range(3)),
            ("console_seek", {"pick": 0, "last": CONSOLE_MAX_LAST, "which": 1}),
        ],
    )


def test_an_append_through_a_peer_of_a_paused_owner_goes_through_a_new_owner(
    deployment: Deployment,
) -> None:
    for which in (0, 1):  # one of the two owns the stream's slot
        replay(
            deployment,
            [
                _bucket_step(0, "none"),
                _text_stream(0, f"p{which}"),
                _append(0, 20),
                ("pause", {"which": which, "pick": 0, "flat": False}),
                _append(0, 20, which),  # through the instance that was paused
            ],
        )


def test_a_trim_by_time_to_the_message_after_a_snapshot_keeps_it(
    deployment: Deployment,
) -> None:
    for which in (0, 1):  # through either instance: one of them owns the stream's slot
        replay(
            deployment,
            [
                _bucket_step(0, "none"),
                _text_stream(0, f"s{which}"),
                _append(0, 10),
                _append(0, 10),
                ("snapshot", {"pick": 0, "index": 2, "which": which}),
                _append(0, 10),  # after the snapshot's offset: its transaction's marker between
                ("trim", {"pick": 0, "index": 2, "by_time": True, "which": which}),
                ("bootstrap", {"pick": 0, "which": 0}),
                ("bootstrap", {"pick": 0, "which": 1}),
            ],
        )


def test_a_listing_through_the_other_instance_names_a_tail_past_a_quiet_streams(
    deployment: Deployment,
) -> None:
    """The passes (tiering, a 1 s age retention) free the home bucket's records past the JSON
    stream's tail (written once, at the start) while the text stream takes more appends: a
    listing through the instance that does not write them names the text stream's tail at
    once, its scan starting at the partition's log start, not at the JSON stream's tail."""
    start = {
        "appends": (2, 1),
        "home": 3,
        "checkpoints": (5000, 5000),
        "retentions": ["long", "long", "none", "short"],
    }
    more = {"pick": 0, "kind": "plain", "which": 0, "flat": False}
    replay(
        deployment,
        [
            ("start", start),
            ("append", more | {"size": 191, "times": 4}),
            ("finalize", {}),
            ("append", more | {"size": 0, "times": 1}),
        ],
    )
