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
    return Target(instance.url, instance.pid, prefix=instance.prefix)


@pytest.fixture(scope="module")
def traced(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """An instance tracing to a collector nobody runs."""
    home = tmp_path_factory.mktemp("hostile-traced")
    with hostile.hostile_instance(
        kafka_bootstrap, home, tracing_endpoint=hostile.SILENT_COLLECTOR
    ) as where:
        yield where


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


async def test_odd_listing_queries_get_a_precise_answer(target: Target) -> None:
    """Each odd listing query is answered as `LISTING_QUERIES` says: a 4xx with its JSON
    error code, or 200."""
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.listing_queries])
    print(hostile.report(measures))
    sent = {key: n for key, n in measures.answers.items() if key.startswith("listing ")}
    want = {
        f"listing {name} {code or '-'} {status}": 1
        for name, (_, status, code) in hostile.LISTING_QUERIES.items()
    }
    assert sent == want
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


# Requests whose first `traceparent` is valid: with tracing on, their records continue its trace.
CONTINUED = ("valid then garbage", "huge tracestate", "latin-1 tracestate")


@pytest.mark.parametrize("tracing", ["off", "on"])
async def test_hostile_trace_contexts_are_answered_and_never_copied_onto_records(
    request: pytest.FixtureRequest, kafka_bootstrap: str, tracing: str
) -> None:
    instance: Target = request.getfixturevalue("instance" if tracing == "off" else "traced")
    target = Target(instance.url, instance.pid, prefix=instance.prefix)
    measures = await hostile.run_shapes(target, BOUNDED, [hostile.trace_contexts])
    print(hostile.report(measures))
    sent = {key.removeprefix("trace context "): n for key, n in measures.answers.items()}
    sent = {key: n for key, n in sent.items() if not key.startswith("probe ")}
    names = hostile.trace_requests(target)
    # Refused by the HTTP parser as any such header field is: past 8,190 bytes (431), with a
    # control byte, which no field value may hold (400). The others as if they carried none.
    parser = {"100 KiB": "431", "control bytes": "400"}
    assert sent == {f"{name} {parser.get(name, '204')}": 1 for name in names}
    probes = {key for key in measures.answers if key.startswith("probe")}
    assert probes == {"probe 200"}, measures.answers  # /healthz answered all along
    stamped = hostile.record_traceparents(kafka_bootstrap, target)
    written = {f"trace {name}".encode() for name in names if name not in parser}
    assert written <= set(stamped), stamped
    garbage = set(hostile.HOSTILE_TRACEPARENTS.values())
    for value, traceparent in stamped.items():
        if tracing == "off":
            assert traceparent is None, (value, traceparent)
            continue
        assert traceparent is not None, value
        assert hostile.W3C_TRACEPARENT.fullmatch(traceparent.decode()), (value, traceparent)
        assert traceparent not in garbage, (value, traceparent)
    if tracing == "on":
        trace_id = hostile.VALID_TRACEPARENT.split("-")[1].encode()
        continued = [stamped[f"trace {name}".encode()] or b"" for name in CONTINUED]
        assert [tp.split(b"-")[1] for tp in continued] == [trace_id] * len(CONTINUED)
    assert await hostile.write_after(target) == "204"
