"""One answer from a short-lived child process that runs Kafka admin work apart from the server.

Some requests may abort librdkafka, or must never share a client with the server
(`topology/group_members.py`, `topology/group_eviction.py`). Each runs in a child: it reads
the client's properties as JSON on its standard input (secrets never appear in a command line)
and writes one JSON object on its standard output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from topology.errors import BrokerUnavailable

# Beyond the work's own deadline: the child's start (an interpreter, librdkafka) and exit.
STARTUP_S = 15.0


def child_answer(
    module: str, args: list[str], properties: dict[str, Any], within_s: float, what: str
) -> dict[str, Any]:
    """The JSON object `python -m module *args` wrote, given `properties` on its input, within
    `within_s` (+ STARTUP_S). BrokerUnavailable, naming `what`, when it wrote none in time."""
    command = [sys.executable, "-m", module, *args]
    try:
        done = subprocess.run(
            command,
            input=json.dumps(properties),
            capture_output=True,
            text=True,
            timeout=within_s + STARTUP_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise BrokerUnavailable(f"{what}: no answer in time") from error
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        said = done.stderr.strip().splitlines()[-1:] or ["nothing"]
        raise BrokerUnavailable(
            f"{what}: the process ended ({done.returncode}): {said[0]}"
        ) from None
    return answer
