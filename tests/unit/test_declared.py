"""One declaration per setting: a setting declared once is read from the TOML file, the
environment and the flags, checked against its bounds, and shown in `serve --help` and in the
settings reference, with nothing else written for it."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapter.cli import build_parser
from adapter.config import ConfigError, Settings, load
from adapter.declared import setting
from devstack.reference import settings_page


@dataclass(frozen=True)
class WithExtra(Settings):
    """The product's settings and one more, declared as every setting is."""

    extra_entries: int = setting(
        5, "extra", "entries", "entries an extra part keeps; 1..9", low=1, high=9
    )


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "extra.toml"
    path.write_text(text)
    return str(path)


def test_a_declared_setting_comes_from_the_toml_file(tmp_path: Path) -> None:
    assert load(None, {}, {}, WithExtra).extra_entries == 5
    assert load(_toml(tmp_path, "[extra]\nentries = 7\n"), {}, {}, WithExtra).extra_entries == 7
    with pytest.raises(ConfigError, match=r"\[extra\] entries: expected int"):
        load(_toml(tmp_path, '[extra]\nentries = "7"\n'), {}, {}, WithExtra)


def test_a_declared_setting_comes_from_the_environment_and_a_flag() -> None:
    env = {"DURABLE_KAFKA_EXTRA_ENTRIES": "3"}
    assert load(None, env, {}, WithExtra).extra_entries == 3
    assert load(None, env, {"extra_entries": "4"}, WithExtra).extra_entries == 4


@pytest.mark.parametrize("value", ["0", "10"])
def test_a_declared_setting_is_held_to_its_bounds(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^extra_entries must be in 1\.\.9$"):
        load(None, {"DURABLE_KAFKA_EXTRA_ENTRIES": value}, {}, WithExtra)


def test_a_declared_setting_is_in_serve_help() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser(WithExtra).parse_args(["serve", "--help"])
    text = " ".join(out.getvalue().split())
    assert "--extra-entries ENTRIES default 5; env DURABLE_KAFKA_EXTRA_ENTRIES" in text


def test_a_declared_setting_is_in_the_reference() -> None:
    row = (
        "| `extra_entries` | `[extra] entries` | `DURABLE_KAFKA_EXTRA_ENTRIES` / "
        "`--extra-entries` | `5` | entries an extra part keeps; 1..9 |"
    )
    assert row in settings_page(WithExtra)
    assert "extra_entries" not in settings_page()


def test_settings_without_the_declaration_know_nothing_of_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting \[extra\] entries"):
        load(_toml(tmp_path, "[extra]\nentries = 7\n"), {}, {})
