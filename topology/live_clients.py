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
    pass


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
        """Give every live client the new pair; how many took it (a closed one cannot)."""
        with self._lock:
            self._pair = (username, password)
            told = 0
            for client in list(self._clients):
                try:
                    client.set_sasl_credentials(username, password)
                    told += 1
                except RuntimeError:  # closed: it will never connect again
                    self._clients.discard(client)
            return told
