"""The coordinator routes a write by its slot, catching up with the meta topic first only when
the write names a stream this instance may not know yet; a sibling worker's read waits for this
catalog to show the stream as its owner described it, and adopts the owner's last access."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from adapter.cluster.catch_up import MetaCatchUp
from adapter.cluster.coordinator import (
    BucketChanged,
    Coordinator,
    Described,
    SnapshotPublished,
    TailMoved,
    Trimmed,
    Write,
)
from adapter.cluster.routing import Forward, Local, Router
from adapter.cluster.slot_writers import SlotWriters
from adapter.log.errors import LogUnavailable
from adapter.log.writer import StateEntry, WriterLimits
from adapter.protocol.commands import StreamRef
from adapter.protocol.model import MountMeta, StreamMeta
from adapter.state.catalog import Catalog
from adapter.tasks import Tasks
from topology.kafka_client import KafkaAccess
from topology.slots import SlotMap

OWN = "http://10.0.0.1:4437"
OWNER = "http://10.0.0.2:4437"
SIBLING = "http://10.0.0.1:4438"
SLOT = 3  # every stream's slot here
KNOWN = StreamMeta("b", "known", 0, "text/plain", 0, 0, 5, 100, 0, ttl_seconds=60)
REF = StreamRef("b", "known")


class _Writers(SlotWriters):
    """Slot writers that accept the `owned` slots (nothing is connected to build them)."""

    def __init__(self, owned: set[int], count: int = 4) -> None:
        super().__init__(
            KafkaAccess("unused:9092", "p.", {}),
            count,
            WriterLimits(1.0, 1024),
            catch_up=_nothing,
            may_reinit=lambda _slot: False,
            announce=_never,
            tasks=Tasks(),
        )
        self.owned = owned

    def accepting(self, slot: int) -> bool:
        return slot in self.owned

    def accepting_all(self) -> bool:
        return len(self.owned) == self.count


class _Streams:
    """This instance's streams as the coordinator asks them: every stream in slot `SLOT`."""

    def __init__(self) -> None:
        self.reflected: list[tuple[StreamRef, int | None, bool, bool]] = []
        self.accessed: list[tuple[StreamRef, int]] = []
        self.shown: list[tuple[str, object]] = []  # what each forwarded write waited for

    @property
    def clock(self) -> Callable[[], int]:
        return lambda: 500

    def slot_of(
        self, bucket_id: str, stream_id: str, forked_from: tuple[str, str] | None = None
    ) -> int:
        return SLOT

    async def reflects(
        self,
        ref: StreamRef,
        next_offset: int | None,
        closed: bool,
        timeout_s: float,
        gone: bool = False,
    ) -> bool:
        self.reflected.append((ref, next_offset, closed, gone))
        return True

    def accessed_elsewhere(self, ref: StreamRef, at_ms: int) -> None:
        self.accessed.append((ref, at_ms))

    async def applied(self, ref: StreamRef, next_offset: int | None, timeout_s: float) -> bool:
        self.shown.append(("tail", next_offset))
        return True

    async def snapshot_applied(self, ref: StreamRef, offset: int, timeout_s: float) -> bool:
        self.shown.append(("snapshot", offset))
        return True

    async def trim_applied(self, ref: StreamRef, earliest: int, timeout_s: float) -> bool:
        self.shown.append(("earliest", earliest))
        return False  # not within its time: logged, and answered anyway

    async def bucket_applied(
        self, bucket_id: str, exists: bool, timeout_s: float, etag: str | None = None
    ) -> bool:
        self.shown.append((bucket_id, exists))
        return True


class _Setup:
    def __init__(self, owned: set[int], siblings: tuple[str, ...] = (), owner: str = OWNER) -> None:
        self.catalog = Catalog()
        self.catalog.put_stream(KNOWN)
        self.streams = _Streams()
        self.caught_up = 0
        writers = _Writers(owned)
        router = Router(writers, lambda _slot: owner, OWN)
        self.catch_up = MetaCatchUp(writers, self._catch_up)
        self.coordinator = Coordinator(
            router, self.catalog, self.streams, SlotMap("p.", 4), self.catch_up, siblings
        )

    async def _catch_up(self) -> None:
        self.caught_up += 1


async def _nothing() -> None:
    return None


def _never(slot: int) -> StateEntry:
    raise AssertionError(f"slot {slot} announced")


async def test_a_write_naming_a_stream_unknown_here_catches_up_before_it_is_routed() -> None:
    setup = _Setup(owned=set())
    route = await setup.coordinator.before_write(Write("b", "new"))
    assert (route, setup.caught_up) == (Forward(SLOT, OWNER), 1)


@pytest.mark.parametrize(
    "write",
    [
        Write("b", "known"),  # known here
        Write("b", "new", forwarded=True),  # the instance that forwarded it routed it
        Write("b", "new", creates=True),  # a creation's name is checked by its owner
        Write("b", "new", snapshot=True),  # a snapshot's stream as known here
        Write("b"),  # a bucket
    ],
)
async def test_a_write_that_names_nothing_unknown_is_routed_at_once(write: Write) -> None:
    setup = _Setup(owned=set())
    await setup.coordinator.before_write(write)
    assert setup.caught_up == 0


async def test_an_instance_taking_every_slot_never_catches_up() -> None:
    setup = _Setup(owned={0, 1, 2, 3})
    route = await setup.coordinator.before_write(Write("b", "new", creates=True))
    assert (route, setup.caught_up) == (Local(SLOT), 0)


async def test_an_owner_creating_a_name_it_does_not_know_catches_up_first() -> None:
    setup = _Setup(owned={SLOT})
    route = await setup.coordinator.before_write(Write("b", "new", creates=True, forwarded=True))
    assert (route, setup.caught_up) == (Local(SLOT), 1)


async def test_a_fork_of_an_unknown_source_catches_up_once_for_both_names() -> None:
    setup = _Setup(owned={SLOT})
    fork = Write("b", "new", fork_source=("b", "unknown"), creates=True)
    assert await setup.coordinator.before_write(fork) == Local(SLOT)
    assert setup.caught_up == 1


async def test_a_catch_up_that_fails_still_routes_the_write() -> None:
    setup = _Setup(owned=set())

    async def unavailable() -> None:
        raise LogUnavailable("the broker is away")

    setup.catch_up.seen_written = unavailable
    assert await setup.coordinator.before_write(Write("b", "new")) == Forward(SLOT, OWNER)


async def test_a_write_to_a_mounted_topic_is_left_to_its_handler() -> None:
    setup = _Setup(owned=set())
    setup.catalog.put_mount(MountMeta("m", "topic", "text/plain", None, "utf-8", False, 0))
    assert await setup.coordinator.before_write(Write("m", "key")) is None
    assert setup.caught_up == 0


async def test_a_bucket_write_is_routed_by_the_bucket_s_slot() -> None:
    setup = _Setup(owned=set())
    assert SlotMap("p.", 4).of_bucket("d") == 2  # not `SLOT`, every stream's here
    assert await setup.coordinator.before_write(Write("d")) == Forward(2, OWNER)


async def test_a_sibling_s_read_waits_for_its_tail_and_renews_here_too() -> None:
    setup = _Setup(owned=set(), siblings=(SIBLING,), owner=SIBLING)
    asked: list[str] = []

    async def ask(url: str) -> Described | None:
        asked.append(url)
        return Described(7, closed=True, last_access_ms=300)

    await setup.coordinator.before_read(REF, renews=True, ask=ask)
    assert asked == [SIBLING]
    assert setup.streams.reflected == [(REF, 7, True, False)]
    assert setup.streams.accessed == [(REF, 500)]  # this read, later than the owner's last


async def test_a_head_adopts_the_owner_s_last_access_only() -> None:
    setup = _Setup(owned=set(), siblings=(SIBLING,), owner=SIBLING)

    async def ask(url: str) -> Described | None:
        return Described(7, last_access_ms=300)

    await setup.coordinator.before_read(REF, renews=False, ask=ask)
    assert setup.streams.accessed == [(REF, 300)]


async def test_a_stream_unknown_here_is_asked_of_every_sibling() -> None:
    other = "http://10.0.0.1:4439"
    setup = _Setup(owned=set(), siblings=(SIBLING, other), owner=SIBLING)
    answers = {SIBLING: Described(None), other: Described(4)}
    asked: list[str] = []

    async def ask(url: str) -> Described | None:
        asked.append(url)
        return answers[url]

    await setup.coordinator.before_read(StreamRef("b", "new"), renews=False, ask=ask)
    assert sorted(asked) == sorted([SIBLING, other])
    assert setup.streams.reflected == [(StreamRef("b", "new"), 4, False, False)]


async def test_a_read_of_a_stream_another_instance_owns_asks_nobody() -> None:
    setup = _Setup(owned=set(), siblings=(SIBLING,), owner=OWNER)

    async def ask(url: str) -> Described | None:
        raise AssertionError(f"{url} asked")

    await setup.coordinator.before_read(REF, renews=True, ask=ask)
    assert setup.streams.reflected == []


def test_a_sibling_is_told_the_last_access_of_a_sliding_ttl_only() -> None:
    setup = _Setup(owned=set())
    assert setup.coordinator.last_access_ms(REF) == 100
    setup.catalog.put_stream(KNOWN.evolve(stream_id="fixed", ttl_seconds=None))
    assert setup.coordinator.last_access_ms(StreamRef("b", "fixed")) is None
    assert setup.coordinator.last_access_ms(StreamRef("b", "absent")) is None


async def test_a_forwarded_write_waits_until_this_catalog_shows_its_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    setup = _Setup(owned=set())
    for change in (
        TailMoved(REF, 9),
        TailMoved(REF, None),
        SnapshotPublished(REF, 4),
        Trimmed(REF, 3),
        BucketChanged("d", True),
    ):
        await setup.coordinator.after_forward(change)
    assert setup.streams.shown == [
        ("tail", 9),
        ("tail", None),
        ("snapshot", 4),
        ("earliest", 3),
        ("d", True),
    ]
    assert [r.getMessage().split(" of ")[0] for r in caplog.records] == ["forwarded trim"]
