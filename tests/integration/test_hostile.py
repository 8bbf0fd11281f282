"""Hostile inputs against one instance whose descriptors are few (`tests/hostile.py`, at
bounded sizes; `make hostile` runs them larger and prints the longest stall): the process
never exits, its memory stays within 64 MiB of its baseline, and it goes on serving. Forged
JWT kids go to a second instance, which checks tokens against an identity provider's JWKS
URL: the provider is asked for its set a few times, not once per kid."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests import hostile
from tests.hostile import BOUNDED, RSS_GROWTH_BYTES, Target
from tests.identity_provider import IdentityProvider

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


async def test_seeks_past_the_console_limit_are_400_by_the_thousand(target: Target) -> None:
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.seeks_over_the_limit])
    print(hostile.report(measures))
    seeks = {key: n for key, n in measures.answers.items() if key.startswith("seek over")}
    assert seeks == {"seek over the limit 400": BOUNDED.requests}, seeks
    assert measures.rss_growth <= RSS_GROWTH_BYTES
    assert await hostile.write_after(target) == "204"


@pytest.fixture(scope="module")
def identity() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as provider:
        yield provider


@pytest.fixture(scope="module")
def checking_jwts(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, identity: IdentityProvider
) -> Iterator[Target]:
    home = tmp_path_factory.mktemp("hostile-jwt")
    with hostile.jwt_instance(kafka_bootstrap, home, identity) as where:
        yield where


async def test_forged_kids_by_the_thousand_fetch_the_key_set_a_few_times(
    checking_jwts: Target, identity: IdentityProvider
) -> None:
    started = time.monotonic()
    measures, fetched = await hostile.forged_kids(checking_jwts, identity, BOUNDED)
    took = time.monotonic() - started
    print(hostile.report(measures))
    forged = {key: n for key, n in measures.answers.items() if key.startswith("forged kid")}
    assert forged == {"forged kid 401": BOUNDED.requests}, forged
    assert 1 <= fetched <= hostile.fetches_allowed(took), (fetched, took)
    probes = {key for key in measures.answers if key.startswith("probe")}
    assert probes == {"probe 200"}, measures.answers  # /healthz answered all along
    assert measures.rss_growth <= RSS_GROWTH_BYTES
    assert await hostile.signed_after(checking_jwts, identity) == "200"


async def test_control_bodies_past_their_limit_are_413_many_at_once(target: Target) -> None:
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.control_bodies])
    print(hostile.report(measures))
    assert hostile.alive(target.pid), measures.notes
    sent = {key: n for key, n in measures.answers.items() if "control body" in key}
    statuses = {key.rsplit(" ", 1)[1] for key in sent}
    assert statuses == {"413"}, sent
    assert sum(sent.values()) == 2 * hostile.CONTROL_IN_FLIGHT * len(hostile.control_routes(target))
    probes = {key for key in measures.answers if key.startswith("probe")}
    assert probes == {"probe 200"}, measures.answers  # /healthz answered all along
    assert measures.rss_growth <= RSS_GROWTH_BYTES
    assert await hostile.write_after(target) == "204"


async def test_deep_and_huge_number_control_json_is_400(target: Target) -> None:
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.control_json])
    print(hostile.report(measures))
    sent = {key: n for key, n in measures.answers.items() if key.startswith("control json")}
    assert {key.rsplit(" ", 1)[1] for key in sent} == {"400"}, sent
    assert await hostile.write_after(target) == "204"
