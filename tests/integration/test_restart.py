"""All state comes back after the adapter and the broker both restart (real processes)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from devstack import kafka
from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.services import DISCARD_S

PRODUCER = {"Producer_Id": "writer-1", "Producer_Epoch": "3"}
STATE_HEADERS = ("Content-Type", "Stream-Next-Offset", "Stream-Closed", "Stream-Expires-At")


def call(
    method: str, url: str, body: bytes = b"", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request; header names are spelled with underscores (Stream_Seq is Stream-Seq)."""
    names = {name.replace("_", "-"): value for name, value in headers.items()}
    request = urllib.request.Request(url, data=body or None, method=method, headers=names)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def populate(base: str) -> None:
    text = {"Content_Type": "text/plain"}
    assert call("PUT", f"{base}/shop")[0] == 201
    assert call("PUT", f"{base}/shop/log", b"a", **text, Stream_TTL="3600")[0] == 201
    assert call("POST", f"{base}/shop/log", b"b", **text, Stream_Seq="005")[0] == 204
    assert call("POST", f"{base}/shop/log", b"p", **text, **PRODUCER, Producer_Seq="0")[0] == 200
    json_ct = {"Content_Type": "application/json"}
    assert call("PUT", f"{base}/shop/done", b'[{"x":1},{"y":2}]', **json_ct)[0] == 201
    assert call("POST", f"{base}/shop/done", Stream_Closed="true")[0] == 204
    expires = {"Stream_Expires_At": "2099-01-01T00:00:00Z"}
    assert call("PUT", f"{base}/v1/stream/flat", b"\x00\x01", **expires)[0] == 201
    # A fork of a fork, and their source soft-deleted: links and states in the meta topic.
    assert call("PUT", f"{base}/shop/base", b"x", **text)[0] == 201
    assert call("PUT", f"{base}/shop/branch", Stream_Forked_From="/shop/base")[0] == 201
    assert call("POST", f"{base}/shop/base", b"later", **text)[0] == 204
    assert call("POST", f"{base}/shop/branch", b"y", **text)[0] == 204
    assert call("PUT", f"{base}/shop/twig", Stream_Forked_From="/shop/branch")[0] == 201
    assert call("DELETE", f"{base}/shop/base")[0] == 204


def snapshot(base: str) -> dict[str, object]:
    """What a client can observe of every stream: HEAD state, bytes, listing, bucket."""
    seen: dict[str, object] = {}
    for path in ("/shop/log", "/shop/done", "/v1/stream/flat", "/shop/base", "/shop/twig"):
        status, headers, _ = call("HEAD", base + path)
        seen[f"HEAD {path}"] = (status, {h: headers.get(h) for h in STATE_HEADERS})
        seen[f"GET {path}"] = call("GET", f"{base}{path}?offset=-1")[2]
    seen["list"] = call("GET", f"{base}/shop/streams")[2]
    return seen


@pytest.mark.timeout(240)
def test_state_survives_restarting_adapter_and_broker(tmp_path: Path) -> None:
    node = kafka.KafkaNode(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka.start(node),
        "DURABLE_KAFKA_COLD_DIR": str(tmp_path / "cold"),
    }
    try:
        with running_adapter(env, tmp_path / "adapter.log") as base:
            populate(base)
            before = snapshot(base)
            ttl_before = int(call("HEAD", f"{base}/shop/log")[1]["Stream-TTL"])
        kafka.stop(node)
        kafka.start(node)
        with running_adapter(env, tmp_path / "adapter.log") as base:
            assert snapshot(base) == before
            assert 0 < int(call("HEAD", f"{base}/shop/log")[1]["Stream-TTL"]) <= ttl_before
            text = {"Content_Type": "text/plain"}
            # Stream-Seq, closure and content types were restored as well.
            assert call("POST", f"{base}/shop/log", b"c", **text, Stream_Seq="004")[0] == 409
            assert call("POST", f"{base}/shop/log", b"c", **text, Stream_Seq="006")[0] == 204
            # Producer state too: a retry is still a duplicate, a stale epoch still fenced.
            assert (
                call("POST", f"{base}/shop/log", b"p", **text, **PRODUCER, Producer_Seq="0")[0]
                == 204
            )
            stale = {**PRODUCER, "Producer_Epoch": "2", "Producer_Seq": "0"}
            assert call("POST", f"{base}/shop/log", b"z", **text, **stale)[0] == 403
            assert (
                call("POST", f"{base}/shop/done", b"[3]", Content_Type="application/json")[0] == 409
            )
            assert call("GET", f"{base}/shop/log?offset=-1")[2] == b"abpc"
            # Fork links and the soft deletion came back: the chain still reads, the source
            # stays 410 and blocked, and deleting its forks collects it.
            assert call("GET", f"{base}/shop/twig?offset=-1")[2] == b"xy"
            assert call("PUT", f"{base}/shop/base", b"", **text)[0] == 409
            assert call("DELETE", f"{base}/shop/branch")[0] == 204
            assert call("HEAD", f"{base}/shop/base")[0] == 410
            assert call("DELETE", f"{base}/shop/twig")[0] == 204
            assert call("HEAD", f"{base}/shop/base")[0] == 404
            assert call("HEAD", f"{base}/shop/branch")[0] == 404
    finally:
        kafka.stop(node, DISCARD_S)
