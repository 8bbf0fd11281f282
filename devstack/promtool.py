"""promtool, built once from the Go module proxy and cached under the home, to check and
unit-test the Prometheus alerting rules in `deploy/monitoring/`."""

from __future__ import annotations

from pathlib import Path

from devstack.go_tools import GoTool

# Prometheus 3.x's Go module versions are v0.3xx (the Go proxy serves no v3 module path).
PROMETHEUS_VERSION = "v0.316.0"
PROMTOOL = GoTool(
    "promtool", "promtool", "github.com/prometheus/prometheus/cmd/promtool", PROMETHEUS_VERSION
)


def binary() -> Path:
    return PROMTOOL.binary()


def is_cached() -> bool:
    return PROMTOOL.is_cached()
