"""The reference pages say what the code says: every setting, route, error code and metric."""

from __future__ import annotations

from dataclasses import fields

import pytest

from adapter.config import TOML_KEYS, Settings
from adapter.protocol.error_help import HELP as ERROR_HELP
from adapter.protocol.errors import ErrorCode
from adapter.settings_help import DEFAULTS_SHOWN
from adapter.settings_help import HELP as SETTING_HELP
from devstack import reference

SETTINGS = [field.name for field in fields(Settings)]
TEST_ONLY = [name for name, (table, _key) in TOML_KEYS.items() if table == "testing"]


def test_every_setting_has_a_meaning_and_no_meaning_is_stale() -> None:
    assert sorted(SETTING_HELP) == sorted(SETTINGS)
    assert set(DEFAULTS_SHOWN) <= set(SETTINGS)
    assert all(text.strip() for text in SETTING_HELP.values())


def test_every_error_code_says_when_and_what_to_do() -> None:
    assert sorted(ERROR_HELP) == sorted(code.code for code in ErrorCode)
    assert all(when.strip() and advice.strip() for when, advice in ERROR_HELP.values())


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_the_committed_page_is_what_the_code_generates(page: str) -> None:
    committed = (reference.PAGES_DIR / page).read_text()
    assert committed == reference.PAGES[page](), (
        f"docs/reference/{page} is stale: run `python -m devstack.reference` and commit it"
    )


def test_each_page_names_everything_it_covers() -> None:
    settings, errors = reference.settings_page(), reference.errors_page()
    assert all(f"`{name}`" in settings for name in SETTINGS if name not in TEST_ONLY)
    assert all(f"`{code.code}`" in errors for code in ErrorCode)
    assert "`durable_kafka_http_requests` | counter | `method`, `route`, `status`" in (
        reference.metrics_page()
    )
    assert "`PUT /{bucket}/{stream}`" in reference.routes_page()


def test_the_test_only_settings_are_not_in_the_reference() -> None:
    settings = reference.settings_page()
    assert TEST_ONLY
    assert [name for name in TEST_ONLY if f"`{name}`" in settings] == []
    assert "[testing]" not in settings
