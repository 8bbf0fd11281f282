"""Appends to writable mounts: plain records produced to the mounted topic.

One idempotent producer per instance (created on first use), `acks=all`, with the Java
client's partitioner (`murmur2_random`), so a key lands where the topic's other producers put
it and its other consumers see ordinary records: key = the stream's key, value = the message,
no headers (with tracing on, a `traceparent` one: the context of the append's span). A
background thread polls for delivery reports; an append waits for all of its
records' reports. Records of one append are not one transaction: if the producer fails
midway, the ones already delivered stay (the answer is 503, which says the outcome is not
known). When the client's certificate files change (`LiveClients.renew`), the next append
makes a new producer; the old one is polled until its records in flight are delivered, then
collected: none is lost, and no append is refused for the old certificate. So does the append
after appends have gone unanswered by any broker for `STALLED_S` (`topology/client_stalls.py`).

Appends with idempotent-producer headers go through `Transactions` instead: one of
`TRANSACTIONAL_SLOTS` transactional producers (`{prefix}mount-writer-{n}`, n chosen by the
stream) writes the records and the producer's new state (our producers topic) in one Kafka
transaction, one transaction at a time per slot. A producer that is (re)initialised fences
whichever instance held its id before and resolves that one's open transaction, so the state
its caller reads afterwards (once the state topics are followed to their end) is exact. A slot
whose producer was made before the certificate files changed gets a new one at its next hold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from adapter.log.errors import LogUnavailable
from adapter.tracing import TRACEPARENT
from topology.client_stalls import STALLED_S, Stall, unreached
from topology.kafka_client import KafkaAccess

log = logging.getLogger(__name__)

POLL_S = 0.1
TRANSACTIONAL_SLOTS = 8
T = TypeVar("T")
StateEntry = tuple[str, str, bytes]  # (topic, key, value) of a state record


class MountWriter:
    def __init__(self, kafka: KafkaAccess, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        owned: dict[str, Any] = {
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 2,
            "delivery.timeout.ms": int(timeout_s * 1000),
        }
        self._kafka = kafka
        self._config = kafka.config(owned, "librdkafka.mount-writer")
        self._producer: Producer | None = None
        self._retired: list[Producer] = []  # replaced, with records still in flight
        self._stall = Stall(STALLED_S)  # how long appends have gone unanswered
        self._stalled = False  # the producer is to be made again at the next append
        self._stop = threading.Event()
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "mount-writer")

    async def produce(
        self, topic: str, key: bytes, values: list[bytes], trace: bytes | None = None
    ) -> list[tuple[int, int]]:
        """(partition, offset) of each value once all are written (acks=all); `trace`: the
        `traceparent` header each record carries (None: no header)."""
        loop = asyncio.get_running_loop()
        producer = self._started()
        futures = [loop.create_future() for _ in values]
        headers = _headers(trace)
        try:
            for value, future in zip(values, futures, strict=True):
                producer.produce(
                    topic, value, key, on_delivery=_reporter(loop, future), headers=headers
                )
        except (BufferError, KafkaException) as error:
            for future in futures:
                future.cancel()
            raise LogUnavailable(f"producing to {topic}: {error}") from error
        try:
            async with asyncio.timeout(self.timeout_s * 2):
                messages: list[Message] = await asyncio.gather(*futures)
        except TimeoutError as error:
            self._reached(False)
            raise LogUnavailable(f"producing to {topic} timed out") from error
        except KafkaException as error:
            self._reached(not unreached(error))
            raise LogUnavailable(f"producing to {topic}: {error}") from error
        self._reached(True)
        return [(m.partition() or 0, m.offset() or 0) for m in messages]

    def _reached(self, reached: bool) -> None:
        if self._stall.too_long(not reached, time.monotonic()):
            log.warning(
                "the mounts' writer has not reached Kafka for %.0fs: making its producer "
                "again, from the bootstrap servers",
                self._stall.limit_s,
            )
            self._stalled = True

    def _started(self) -> Producer:
        if self._producer is None:
            self._producer = self._kafka.producer(self._config)
            self._thread.submit(self._poll)
        elif self._stalled or self._kafka.clients.stale(self._producer):
            self._stalled = False  # or the certificate files changed
            self._retired.append(self._producer)
            self._producer = self._kafka.producer(self._config)
        return self._producer

    def _poll(self) -> None:
        """Delivery reports of the producer and of the retired ones until they are done."""
        while not self._stop.is_set():
            for retired in list(self._retired):
                retired.poll(0)
                if len(retired) == 0:  # every record delivered: its reports are in
                    self._retired.remove(retired)
            if self._producer is not None:
                self._producer.poll(POLL_S)

    async def close(self) -> None:
        self._stop.set()
        producers = [*self._retired, *([self._producer] if self._producer else [])]
        for producer in producers:
            await asyncio.get_running_loop().run_in_executor(
                self._thread, producer.flush, self.timeout_s
            )
        self._thread.shutdown(wait=False, cancel_futures=True)


def _headers(trace: bytes | None) -> list[tuple[str, str | bytes | None]] | None:
    """A mounted topic's records carry no header but, when tracing, their request's context."""
    return None if trace is None else [(TRACEPARENT, trace)]


def _reporter(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Message]) -> Any:
    def report(error: KafkaError | None, message: Message) -> None:
        loop.call_soon_threadsafe(_settle, future, error, message)

    return report


def _settle(future: asyncio.Future[Message], error: KafkaError | None, message: Message) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(message)


def transactional_slot(bucket_id: str, stream_id: str) -> int:
    """The transactional producer of a mounted stream's idempotent appends (always the same)."""
    return zlib.crc32(f"{bucket_id}/{stream_id}".encode()) % TRANSACTIONAL_SLOTS


@dataclass
class Transaction:
    """One slot's producer, held by one append at a time."""

    producer: Producer
    # Initialised and the state topics not yet followed since (the holder does that, then
    # clears it): another instance may have committed before this producer fenced it.
    fresh: bool = True


class Transactions:
    """Transactional producers for mounted appends with producer state, one per slot."""

    def __init__(self, kafka: KafkaAccess, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        owned: dict[str, Any] = {
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 0,
            "transaction.timeout.ms": max(int(timeout_s * 4000), 10_000),
        }
        self._config = kafka.config(owned, "librdkafka.mount-writer")
        self._kafka = kafka
        self._held: dict[int, Transaction] = {}
        self._locks = [asyncio.Lock() for _ in range(TRANSACTIONAL_SLOTS)]
        self._thread = concurrent.futures.ThreadPoolExecutor(2, "mount-transactions")

    @contextlib.asynccontextmanager
    async def slot(self, slot: int) -> AsyncIterator[Transaction]:
        """Hold the slot's producer (initialised on first use or after a failure); a Kafka
        failure or a cancellation inside drops it (its transaction's outcome is unknown, and
        its thread may still be using it), so the next holder starts with a fresh, fencing
        one. A refusal (a sequence gap, ...) keeps it."""
        async with self._locks[slot]:
            held = self._held.get(slot)
            if held is not None and self._kafka.clients.stale(held.producer):
                # Made before the certificate files changed; between two transactions here,
                # so its successor's init fences it with nothing open.
                del self._held[slot]
                held = None
            if held is None:
                held = Transaction(await self._run(lambda: self._initialised(slot)))
                self._held[slot] = held
            try:
                yield held
            except (LogUnavailable, asyncio.CancelledError):
                self._held.pop(slot, None)
                raise

    async def write(
        self,
        held: Transaction,
        topic: str,
        key: bytes,
        values: list[bytes],
        state: StateEntry,
        trace: bytes | None = None,
    ) -> list[tuple[int, int]]:
        """(partition, offset) of each value, committed with `state` in one transaction; each
        record carries `trace` in its `traceparent` header (None: no header)."""
        headers = _headers(trace)
        return await self._run(
            lambda: self._transact(held.producer, topic, key, values, state, headers)
        )

    def _initialised(self, slot: int) -> Producer:
        config = self._config | {
            "transactional.id": self._kafka.transactional_id(f"mount-writer-{slot}")
        }
        producer = self._kafka.producer(config)
        producer.init_transactions(self.timeout_s)
        return producer

    def _transact(
        self,
        producer: Producer,
        topic: str,
        key: bytes,
        values: list[bytes],
        state: StateEntry,
        headers: list[tuple[str, str | bytes | None]] | None,
    ) -> list[tuple[int, int]]:
        written: list[tuple[int, int]] = []
        failed: list[KafkaError] = []

        def report(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failed.append(error)
            else:
                written.append((message.partition() or 0, message.offset() or 0))

        producer.begin_transaction()
        try:
            for value in values:
                producer.produce(topic, value, key, on_delivery=report, headers=headers)
            state_topic, state_key, state_value = state
            producer.produce(state_topic, state_value, state_key.encode(), partition=0)
            producer.commit_transaction(self.timeout_s)  # flushes: every report is in
        except (BufferError, KafkaException) as error:
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(self.timeout_s)
            raise LogUnavailable(f"producing to {topic} in a transaction: {error}") from error
        if failed or len(written) != len(values):
            raise LogUnavailable(f"producing to {topic}: {failed}")
        return sorted(written)

    async def _run(self, work: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout_s * 3):
                return await loop.run_in_executor(self._thread, work)
        except TimeoutError as error:
            raise LogUnavailable("a mounted topic's transaction timed out") from error
        except KafkaException as error:
            raise LogUnavailable(f"a mounted topic's transactional producer: {error}") from error

    def close(self) -> None:
        self._held.clear()
        self._thread.shutdown(wait=False, cancel_futures=True)
