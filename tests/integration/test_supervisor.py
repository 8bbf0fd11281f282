"""Start-up's durability checks against the real single-node broker."""

from __future__ import annotations

import logging

import pytest

from adapter.app import create_app
from tests.conftest import ClientFactory, SettingsFactory, wait_ready


async def test_one_broker_starts_without_a_durability_warning(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # RF 1 and min.insync.replicas 1 are all a single broker allows: neither warned nor refused.
    settings = make_settings(require_durable_topics=True)
    with caplog.at_level(logging.WARNING, logger="adapter.supervisor"):
        await wait_ready(await aiohttp_client(create_app(settings)))
    assert not [r for r in caplog.records if "weak durability" in r.getMessage()]


async def test_slow_commits_are_warned_at_start(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(kafka_timeout_ms=20_000)
    with caplog.at_level(logging.WARNING, logger="adapter.supervisor"):
        await wait_ready(await aiohttp_client(create_app(settings)))
    warnings = [r for r in caplog.records if "weak durability" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "kafka_timeout_ms to at most 14999" in warnings[0].getMessage()
