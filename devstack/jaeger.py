"""Jaeger, the tracing tests' collector: built once from the Go module proxy and cached under
the home; run with an in-memory store, its OTLP/HTTP receiver and its query API on free
loopback ports."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.go_tools import GoTool
from devstack.process import ServiceProcess

# The newest approved release on the Go module proxy (a Jaeger v2, on the OpenTelemetry
# Collector); its go.mod has replace directives, so it is built as a tool.
JAEGER_VERSION = "v1.75.0"
JAEGER = GoTool(
    "jaeger", "Jaeger", "github.com/jaegertracing/jaeger/cmd/jaeger", JAEGER_VERSION, as_tool=True
)
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class JaegerNode:
    """One Jaeger: its folder (config, log, pid) and its loopback ports."""

    home: Path
    otlp_port: int
    query_port: int
    query_grpc_port: int
    health_port: int

    @property
    def otlp_url(self) -> str:
        """The OTLP/HTTP base URL (spans go to `/v1/traces` under it)."""
        return f"http://127.0.0.1:{self.otlp_port}"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    @property
    def process(self) -> ServiceProcess:
        return ServiceProcess("jaeger", self.home)


def binary() -> Path:
    """The `jaeger` executable, built on first use (several minutes)."""
    return JAEGER.binary()


def is_cached() -> bool:
    return JAEGER.is_cached()


def config(node: JaegerNode) -> dict[str, object]:
    """An all-in-one Jaeger on `node`'s ports: OTLP/HTTP in, a memory store, the query API;
    no other listener (its own metrics off), so several can run side by side."""
    host = "127.0.0.1"
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": [],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {"memory_store": {"memory": {"max_traces": 100_000}}}},
            "jaeger_query": {
                "storage": {"traces": "memory_store"},
                "http": {"endpoint": f"{host}:{node.query_port}"},
                "grpc": {"endpoint": f"{host}:{node.query_grpc_port}"},
            },
            "healthcheckv2": {
                "use_v2": True,
                "http": {"endpoint": f"{host}:{node.health_port}"},
            },
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"{host}:{node.otlp_port}"}}}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memory_store"}},
    }


def is_live(node: JaegerNode) -> bool:
    """Whether its query API answers (the receiver starts before it)."""
    try:
        with urllib.request.urlopen(f"{node.query_url}/api/services", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(node: JaegerNode) -> JaegerNode:
    """Start Jaeger on `node` (JSON is YAML: the config is written as JSON)."""
    node.home.mkdir(parents=True, exist_ok=True)
    path = node.home / "jaeger.yaml"
    path.write_text(json.dumps(config(node), indent=2))
    node.process.spawn([str(binary()), "--config", str(path)])
    node.process.wait_ready(lambda: is_live(node), START_TIMEOUT_S)
    return node


def stop(node: JaegerNode, timeout_s: float = 10.0) -> None:
    node.process.stop(timeout_s)
