"""Hostile inputs against one instance whose descriptors are few (`tests/hostile.py`, at
bounded sizes; `make hostile` runs them larger and prints the longest stall): the process
never exits, its memory stays within 64 MiB of its baseline, and it goes on serving."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import hostile
from tests.hostile import BOUNDED, RSS_GROWTH_BYTES, Target

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def instance(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    home = tmp_path_factory.mktemp("hostile")
    with hostile.hostile_instance(kafka_bootstrap, home) as where:
        yield where


@pytest.fixture
def target(instance: Target) -> Target:
    """The instance, with a bucket of this test's own."""
    return Target(instance.url, instance.pid)


async def test_idle_connections_past_the_descriptor_limit_are_refused_at_once(
    target: Target,
) -> None:
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.idle_connections])
    print(hostile.report(measures))
    assert hostile.alive(target.pid), measures.notes
    (answer,) = [key for key in measures.answers if key.startswith("idle: a new client")]
    assert answer.endswith(("503", "200")), answer  # answered while the others are held
    assert not measures.server_errors()
    assert await hostile.write_after(target) == "204"


async def test_a_json_array_of_millions_of_messages_is_413_without_reading_them(
    target: Target,
) -> None:
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.json_array_bomb])
    print(hostile.report(measures))
    bombs = [key for key in measures.answers if key.startswith("json array bomb")]
    assert len(bombs) == 2
    assert all(key.endswith(" 413") for key in bombs), bombs
    assert measures.rss_growth <= RSS_GROWTH_BYTES
    assert await hostile.write_after(target) == "204"


async def test_every_hostile_shape_leaves_the_instance_serving(target: Target) -> None:
    measures = await hostile.run_shapes(target, BOUNDED)
    print(hostile.report(measures))
    assert hostile.alive(target.pid), measures.notes
    assert not measures.server_errors(), measures.server_errors()
    assert measures.rss_growth <= RSS_GROWTH_BYTES
    assert await hostile.write_after(target) == "204"
