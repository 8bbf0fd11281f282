"""Avro schemas (`*.avsc`) of every record durable-kafka writes besides raw message bytes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent


@cache
def load(name: str) -> dict[str, Any]:
    """The parsed `.avsc` document named `name` (without the extension)."""
    schema: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.avsc").read_text())
    return schema
