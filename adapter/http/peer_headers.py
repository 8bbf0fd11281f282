"""The headers instances add to the requests they send each other (forwarded writes, reads asked
of an owner), and the forward id of an append another instance forwarded here."""

from __future__ import annotations

import re
from typing import Final

from aiohttp import web

FORWARDED: Final = "Durable-Kafka-Forwarded"  # never forwarded again
FORWARD_ID: Final = "Durable-Kafka-Forward-Id"  # an append's id, written on its records
# On a forwarded write: the offset of the slot's owner record the forwarder routed it on; the
# owner carries the write out only while that record is its latest (`ROUTED_UNDER`).
OWNER_MARK: Final = "Durable-Kafka-Owner-Mark"
# On a sibling worker's synchronising read (`serve --workers`): the owner's last access to the
# stream (ms since the epoch), which the sibling adopts when later than its own.
LAST_ACCESS: Final = "Durable-Kafka-Last-Access"
# On a request a sibling worker forwards over its Unix socket: the subject (`CN=...`) of the
# client certificate the request came with, which only the worker it entered could see.
# Believed only from a Unix socket (siblings alone reach it); never copied from a client.
CERTIFICATE_SUBJECT: Final = "Durable-Kafka-Certificate-Subject"
# On every request an instance sends another, with `peer_key_file` set: the deployment's shared
# key. A connection whose request carries it is a peer's, not counted per client address
# (`adapter/http/server.py`); never passed on, never logged.
PEER_KEY: Final = "Durable-Kafka-Peer-Key"
_FORWARD_ID_SHAPE: Final = re.compile("[0-9a-f]{32}")


def owner_mark_of(request: web.Request) -> int | None:
    """The owner mark a forwarded write was routed on (None: not forwarded, or sent by an
    instance that names none)."""
    value = request.headers.get(OWNER_MARK)
    if value is None or FORWARDED not in request.headers:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def forward_id_of(request: web.Request) -> str | None:
    """The forward id of an append another instance forwarded here (None for any other)."""
    value = request.headers.get(FORWARD_ID)
    if value is None or FORWARDED not in request.headers:
        return None
    return value if _FORWARD_ID_SHAPE.fullmatch(value) else None
