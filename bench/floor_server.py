"""The floor of a Python append server: what aiohttp on uvloop costs before any product code.

This server answers the bench's append scenarios with nothing but what any
Python implementation on aiohttp must do, so the suite can show how much of durable-kafka's
cost is the HTTP layer itself:

- `memory`: PUT creates a stream (201), POST adds the body to an in-memory list (204 with a
  `Stream-Next-Offset`). No validation, no auth, no metrics: the HTTP floor.
- `kafka`: the same, and every append is produced to a Kafka topic and acknowledged after
  the transaction that holds it commits. A thread per producer runs transactions back to back,
  each holding every append queued since the previous one began: the group-commit floor of a
  Python server on confluent-kafka, with no catalog, no offsets check, no state records. One
  producer (the default) is its fastest and cheapest on 2 cores: 100 streams closed loop gave
  7,502/s at 93 µs per append with one, 5,940/s at 143 µs with four, 4,731/s at 180 µs with
  eight (bigger transactions cost less per append).

It is a benchmark target (`bench.targets`), not part of the product.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import sys
import threading
import uuid
from concurrent.futures import Future

import uvloop
from aiohttp import web
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

Pending = tuple[bytes, bytes, Future[None]]


class TransactionLoop:
    """One thread: take every queued append, produce them in one transaction, commit, answer."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = partition
        self._queue: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"floor-{uuid.uuid4().hex}",
                "linger.ms": 0,
                "enable.idempotence": True,
            }
        )
        self._producer.init_transactions(30)
        threading.Thread(target=self._run, name="floor-txn", daemon=True).start()

    def append(self, key: bytes, value: bytes) -> asyncio.Future[None]:
        done: Future[None] = Future()
        self._queue.put((key, value, done))
        return asyncio.wrap_future(done)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._producer.begin_transaction()
                for key, value, _ in batch:
                    self._producer.produce(self._topic, value, key, self._partition)
                self._producer.commit_transaction(30)
            except KafkaException as error:  # the batch fails; a 503 says so
                if error.args[0].txn_requires_abort():
                    self._producer.abort_transaction(30)
                for _, _, done in batch:
                    done.set_exception(error)
                continue
            for _, _, done in batch:
                done.set_result(None)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor=1)])
    futures[topic].result(30)


def build_app(transactions: list[TransactionLoop]) -> web.Application:
    streams: dict[str, list[bytes]] = {}

    async def put(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        created = name not in streams
        streams.setdefault(name, [])
        return web.Response(status=201 if created else 200)

    async def post(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        messages = streams.get(name)
        if messages is None:
            return web.Response(status=404)
        body = await request.read()
        if transactions:  # in Kafka: the count is all this server keeps
            key = name.encode()
            try:
                await transactions[hash(key) % len(transactions)].append(key, body)
            except KafkaException:
                return web.Response(status=503)
            body = b""
        messages.append(body)
        return web.Response(status=204, headers={"Stream-Next-Offset": str(len(messages))})

    async def get(request: web.Request) -> web.Response:
        return web.Response(status=200 if request.match_info["name"] in streams else 404)

    app = web.Application()
    app.router.add_put("/v1/stream/{name}", put)
    app.router.add_post("/v1/stream/{name}", post)
    app.router.add_get("/v1/stream/{name}", get)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mode", choices=("memory", "kafka"), default="memory")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--producers", type=int, default=1, help="kafka: transactions at once")
    parser.add_argument("--topic", default="", help="kafka: created here (default: a new name)")
    args = parser.parse_args(argv)
    uvloop.install()
    transactions = []
    if args.mode == "kafka":
        topic = args.topic or f"bench-floor-{uuid.uuid4().hex[:12]}"
        create_topic(args.bootstrap_servers, topic, args.producers)
        transactions = [
            TransactionLoop(args.bootstrap_servers, topic, n) for n in range(args.producers)
        ]
    web.run_app(
        build_app(transactions),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        print=lambda line: print(line, flush=True),
        handle_signals=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
