"""The reference pages say what the code says: every setting, route, error code and metric."""

from __future__ import annotations

import pytest

from adapter.config import Settings
from adapter.declared import declarations
from adapter.protocol.error_help import HELP as ERROR_HELP
from adapter.protocol.errors import ErrorCode
from devstack import reference

SETTINGS = [setting.name for setting in declarations(Settings)]


def test_every_setting_has_a_meaning() -> None:
    assert all(setting.declared.help.strip() for setting in declarations(Settings))


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
    assert all(f"`{name}`" in settings for name in SETTINGS)
    assert all(f"`{code.code}`" in errors for code in ErrorCode)
    assert "`durable_kafka_http_requests` | counter | `method`, `route`, `status`" in (
        reference.metrics_page()
    )
    assert "`PUT /{bucket}/{stream}`" in reference.routes_page()
