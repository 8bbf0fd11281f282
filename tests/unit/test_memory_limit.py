"""`max_memory_bytes` auto: a share of the container's memory limit, read from a file standing
for cgroup v2's memory.max."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.config import ConfigError, load
from adapter.http.connections import ConnectionLimits
from adapter.memory_limit import AUTO, container_limit, memory_cap

GIB = 1024**3


def memory_max(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "memory.max"
    path.write_text(text)
    return path


def test_auto_is_three_quarters_of_the_limit(tmp_path: Path) -> None:
    assert memory_cap(AUTO, memory_max(tmp_path, f"{GIB}\n")) == 3 * GIB // 4


def test_auto_is_no_cap_when_the_container_is_unlimited(tmp_path: Path) -> None:
    assert container_limit(memory_max(tmp_path, "max\n")) is None
    assert memory_cap(AUTO, memory_max(tmp_path, "max\n")) == 0


def test_auto_is_no_cap_outside_a_container(tmp_path: Path) -> None:
    assert memory_cap(AUTO, tmp_path / "absent") == 0


@pytest.mark.parametrize("configured", [0, 256 * 1024 * 1024])
def test_a_value_set_explicitly_is_kept(tmp_path: Path, configured: int) -> None:
    assert memory_cap(configured, memory_max(tmp_path, f"{GIB}\n")) == configured


def test_auto_is_the_default_and_may_be_spelled() -> None:
    assert load(None, {}, {}).max_memory_bytes == AUTO
    assert load(None, {"DURABLE_KAFKA_MAX_MEMORY_BYTES": "auto"}, {}).max_memory_bytes == AUTO
    assert load(None, {"DURABLE_KAFKA_MAX_MEMORY_BYTES": "0"}, {}).max_memory_bytes == 0
    with pytest.raises(ConfigError, match="max_memory_bytes must be auto, 0"):
        load(None, {"DURABLE_KAFKA_MAX_MEMORY_BYTES": "1000"}, {})


def test_the_connection_limits_take_the_resolved_cap(tmp_path: Path) -> None:
    """What the server enforces: ConnectionLimits.of resolves auto on this machine."""
    limit = container_limit()
    expected = 0 if limit is None else int(limit * 0.75)
    assert ConnectionLimits.of(load(None, {}, {})).max_memory_bytes == expected
