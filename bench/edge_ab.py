"""What the edge (the middlewares every request passes) costs per request, in process, this
checkout against another (`--base`: a checkout with its own `.venv`).

Each checkout's own `create_app` is built (on a broker it never uses: nothing is started)
with one route, `POST /{bucket}/{stream}`, whose handler waits three times (an append waits
for its transaction) then answers 204; requests with a 100-byte body made with aiohttp's
`make_mocked_request` pass `Application._handle` one after the other, and the event loop
thread's CPU time per request is measured (`time.thread_time`: the clients' threads are not
counted; the requests are made beforehand). Rounds alternate between the checkouts, each in a
process of its own, the order flipping every pair. Prints one JSON object: each round's µs per
request, each pair's ratio (this / base: below 1 is cheaper), their median and spread.

    .venv/bin/python -m bench.edge_ab --base ../base [--pairs 10 --requests 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import streams

CHECKOUTS = ("this", "base")
WAITS = 3  # the handler's suspensions
BODY = b"x" * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the other checkout (with its .venv)")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(asyncio.run(_measure(args.requests, args.bootstrap_servers)))
        return
    this = Path(__file__).resolve().parent.parent
    checkouts = {"this": this, "base": Path(args.base).resolve()}
    rounds: dict[str, list[float]] = {name: [] for name in CHECKOUTS}
    for pair in range(args.pairs):
        for name in CHECKOUTS if pair % 2 == 0 else CHECKOUTS[::-1]:
            rounds[name].append(_round(checkouts[name], args))
            print(f"pair {pair}: {name} {rounds[name][-1]:.2f} µs", file=sys.stderr, flush=True)
    each = [a / b for a, b in zip(rounds["this"], rounds["base"], strict=True)]
    print(
        json.dumps(
            {
                "requests": args.requests,
                "us_per_request": {
                    name: [round(us, 2) for us in rounds[name]] for name in CHECKOUTS
                },
                "ratio": {
                    "each": [round(ratio, 3) for ratio in each],
                    "median": round(statistics.median(each), 3),
                    "spread": [round(min(each), 3), round(max(each), 3)],
                },
            },
            indent=1,
        )
    )


def _round(checkout: Path, args: argparse.Namespace) -> float:
    """One round in a process of `checkout`'s interpreter (which imports its `adapter`)."""
    command = [str(checkout / ".venv" / "bin" / "python"), __file__, "--measure"]
    command += ["--requests", str(args.requests), "--bootstrap-servers", args.bootstrap_servers]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


async def _measure(requests: int, bootstrap_servers: str) -> float:
    """µs of this thread's CPU per request through the app's middlewares to the handler."""
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from adapter.app import create_app
    from adapter.http import health
    from adapter.http.bodies import Body
    from adapter.http.route_table import Op, Owner, Route
    from adapter.settings import Settings
    from adapter.supervisor import CATALOG

    logging.disable(logging.WARNING)  # the request log's lines are not what is measured

    async def handler(_request: web.Request) -> web.StreamResponse:
        for _ in range(WAITS):
            await asyncio.sleep(0)
        return web.Response(status=204)

    folder = Path(tempfile.mkdtemp(prefix="edge-ab-"))
    settings = Settings(
        bootstrap_servers=bootstrap_servers,
        topic_prefix="bench.edgeab.",
        cold_dir=str(folder / "cold"),
        mount_index_dir=str(folder / "mount-index"),
        catalog_dir=str(folder / "catalog"),
    )
    op = Op("POST", handler, None, Owner.NONE, Body.HELD, None)
    app = create_app(settings, table=(Route("/{bucket}/{stream}", (op,)),))
    app[health.READINESS].set(CATALOG, True, "measured")
    app.freeze()
    headers = {"Host": "localhost", "Content-Length": str(len(BODY))}

    def made() -> web.Request:
        payload = _payload(BODY)
        return make_mocked_request("POST", "/b/s", headers=headers, app=app, payload=payload)

    async def served(made: list[web.Request]) -> None:
        for request in made:
            response = await app._handle(request)
            assert response.status == 204, response.status

    await served([made() for _ in range(requests // 10)])  # warm
    timed = [made() for _ in range(requests)]  # made beforehand: mocks are slow
    began = time.thread_time()
    await served(timed)
    return (time.thread_time() - began) / requests * 1e6


def _payload(body: bytes) -> streams.StreamReader:
    from unittest import mock

    protocol = mock.Mock(_reading_paused=False)
    reader = streams.StreamReader(protocol, 2**16, loop=asyncio.get_running_loop())
    reader.feed_data(body)
    reader.feed_eof()
    return reader


if __name__ == "__main__":
    main()
