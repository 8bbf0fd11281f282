"""Helm, built once from the Go module proxy and cached under the home, to render the chart."""

from __future__ import annotations

from pathlib import Path

from devstack.go_tools import GoTool

HELM_VERSION = "v3.22.0"
HELM = GoTool("helm", "Helm", "helm.sh/helm/v3/cmd/helm", HELM_VERSION)


def binary() -> Path:
    return HELM.binary()


def is_cached() -> bool:
    return HELM.is_cached()
