"""What background work (the tier worker, the collectors, the sweeper) rides out.

Anything a request would be answered 503 or 504 for — Kafka or the store away, an outcome not
learned in time (`Retriable`), a topic deleted under a pass — is logged in one line and the
pass tried again later. It never ends the task: the process's supervisor turns a dead task into
exit 1, and a broker flap would then drop every live reader of every instance at once.
"""

from __future__ import annotations

from typing import Final

from adapter.log.errors import Retriable
from adapter.objects.base import ObjectStoreError
from topology.errors import TopologyError

RIDDEN_OUT: Final = (Retriable, ObjectStoreError, TopologyError)
