"""Appends to writable mounts: plain records produced to the mounted topic.

One idempotent producer per instance (created on first use), `acks=all`, with the Java
client's partitioner (`murmur2_random`), so a key lands where the topic's other producers put
it and its other consumers see ordinary records: key = the stream's key, value = the message,
no headers. A background thread polls for delivery reports; an append waits for all of its
records' reports. Records of one append are not one transaction: if the producer fails
midway, the ones already delivered stay (the answer is 503, which says the outcome is not
known).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from adapter.log.errors import LogUnavailable

log = logging.getLogger(__name__)

POLL_S = 0.1


class MountWriter:
    def __init__(self, bootstrap_servers: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 2,
            "delivery.timeout.ms": int(timeout_s * 1000),
            "logger": logging.getLogger("librdkafka.mount-writer"),
        }
        self._producer: Producer | None = None
        self._stop = threading.Event()
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "mount-writer")

    async def produce(self, topic: str, key: bytes, values: list[bytes]) -> list[tuple[int, int]]:
        """(partition, offset) of each value once all are written (acks=all)."""
        loop = asyncio.get_running_loop()
        producer = self._started()
        futures = [loop.create_future() for _ in values]
        try:
            for value, future in zip(values, futures, strict=True):
                producer.produce(topic, value, key, on_delivery=_reporter(loop, future))
        except (BufferError, KafkaException) as error:
            for future in futures:
                future.cancel()
            raise LogUnavailable(f"producing to {topic}: {error}") from error
        try:
            async with asyncio.timeout(self.timeout_s * 2):
                messages: list[Message] = await asyncio.gather(*futures)
        except TimeoutError as error:
            raise LogUnavailable(f"producing to {topic} timed out") from error
        return [(m.partition() or 0, m.offset() or 0) for m in messages]

    def _started(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._config)
            self._thread.submit(self._poll, self._producer)
        return self._producer

    def _poll(self, producer: Producer) -> None:
        while not self._stop.is_set():
            producer.poll(POLL_S)

    async def close(self) -> None:
        self._stop.set()
        if self._producer is not None:
            producer = self._producer
            await asyncio.get_running_loop().run_in_executor(
                self._thread, lambda: producer.flush(self.timeout_s)
            )
        self._thread.shutdown(wait=False, cancel_futures=True)


def _reporter(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Message]) -> Any:
    def report(error: KafkaError | None, message: Message) -> None:
        loop.call_soon_threadsafe(_settle, future, error, message)

    return report


def _settle(future: asyncio.Future[Message], error: KafkaError | None, message: Message) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(LogUnavailable(f"producing to a mounted topic: {error}"))
    else:
        future.set_result(message)
