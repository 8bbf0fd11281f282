"""The Kafka clients of one instance that are still alive, so a new SASL password reaches
them without a restart.

Kubernetes replaces a mounted Secret's files in place; the broker's SCRAM password changes
with it. A connection already authenticated stays so, but every reconnection authenticates
again: librdkafka's `set_sasl_credentials` gives each live client the new pair, and every
client created from then on is created with it (`create`, under the lock, so none is missed).
Only PLAIN and SCRAM credentials can change this way.

Certificate files cannot be given to a live client: librdkafka reads them when it makes one.
When they change, `renew` makes every client made until then stale: the owners of the clients
that are made again at a safe point of their own (a pooled reader between two loans, the
scanner between two scans) ask `stale` there and make a new one.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


# Subclasses only so that the set can hold them weakly (the C types take no weak reference).
class LiveProducer(Producer):
    pass


class LiveConsumer(Consumer):
    """A consumer that takes a new SASL pair in the thread that uses it.

    The Python binding lets one thread at a time into a consumer and makes any other wait,
    spinning, for a gap between two calls; a thread that polls in a loop leaves none, so a
    `set_sasl_credentials` from elsewhere may wait for ever. `rotate` only leaves the pair
    here (`offer`), and the next call of the consumer's own thread gives it to librdkafka."""

    _offered: tuple[str, str] | None = None
    _taken: tuple[str, str] | None = None

    def offer(self, pair: tuple[str, str]) -> None:
        self._offered = pair

    def _take_offered(self) -> None:
        offered = self._offered  # read once: `offer` may replace it meanwhile
        if offered is not None and offered is not self._taken:
            super().set_sasl_credentials(*offered)
            self._taken = offered

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().poll(*args, **kwargs)

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().consume(*args, **kwargs)

    def assign(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().assign(*args, **kwargs)

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().get_watermark_offsets(*args, **kwargs)

    def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().offsets_for_times(*args, **kwargs)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        self._take_offered()
        return super().list_topics(*args, **kwargs)


class LiveAdmin(AdminClient):
    pass


Client = TypeVar("Client", LiveProducer, LiveConsumer, LiveAdmin)


class LiveClients:
    """Every client created through `create` that is not yet collected, and the SASL pair
    that replaced the configured one (None: the configured one still holds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._pair: tuple[str, str] | None = None
        self._generation = 0  # how many times the certificate files changed
        self._born: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def create(self, kind: Callable[[dict[str, Any]], Client], config: Mapping[str, Any]) -> Client:
        with self._lock:
            client = kind(self._fresh(config))
            self._clients.add(client)
            self._born[client] = self._generation
            return client

    def renew(self) -> None:
        """The certificate files changed: every client made until now is stale."""
        with self._lock:
            self._generation += 1

    def stale(self, client: object) -> bool:
        """Whether `client` was made before the certificate files last changed."""
        with self._lock:
            return self._born.get(client, self._generation) < self._generation

    def fresh(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """`config` with the latest SASL pair (for a client made elsewhere, e.g. a child)."""
        with self._lock:
            return self._fresh(config)

    def _fresh(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if self._pair is None or "sasl.username" not in config:
            return dict(config)
        return {**config, "sasl.username": self._pair[0], "sasl.password": self._pair[1]}

    def rotate(self, username: str, password: str) -> int:
        """Give every live client the new pair; how many were told (a closed producer or
        admin client cannot take it; a consumer takes it on its next call, `LiveConsumer`).

        Call it from a thread, not the event loop: librdkafka may wait for a client's lock.
        The lock here is not held meanwhile: a client created from now on takes the new pair
        from `_fresh`."""
        pair = (username, password)
        with self._lock:
            self._pair = pair
            clients = list(self._clients)
        told = 0
        for client in clients:
            if isinstance(client, LiveConsumer):
                client.offer(pair)
                told += 1
                continue
            try:
                client.set_sasl_credentials(username, password)
                told += 1
            except RuntimeError:  # closed: it will never connect again
                with self._lock:
                    self._clients.discard(client)
        return told
