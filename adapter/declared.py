"""How a setting is declared: once, on its `Settings` field, with everything derived from it.

A field made by `setting(...)` carries its TOML table and key, its help text, its bounds or
allowed values and how its default reads. Its type is its default's; its environment variable
and flag follow from its name (`env_name`, `flag_name`). The loader, the per-field checks,
`serve --help` and the settings reference all read these declarations, so a setting cannot be
known to one of them and missing from another. Standard library only, and cheap to import: the
server and each of its workers load settings at start (pydantic-settings took ~0.4 s to import).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")
ENV_PREFIX = "DURABLE_KAFKA_"
_KEY = "durable_kafka.setting"


class ConfigError(ValueError):
    """A setting is missing, malformed or out of range; the message names it and its source."""


@dataclass(frozen=True)
class Rule:
    """A check of one value that bounds cannot say: `says` is formatted with the setting's
    `name` and the value's `repr` as `value`."""

    ok: Callable[[Any], bool]
    says: str


@dataclass(frozen=True)
class Structured:
    """A value that is no scalar (a table, a list of tables): how to read it from its TOML
    value and from the JSON text an environment variable or a flag gives, each given where it
    came from for its errors."""

    from_toml: Callable[[Any, str], Any]
    from_text: Callable[[str, str], Any]


@dataclass(frozen=True)
class Declared:
    """One setting's declaration besides its name, type and default."""

    table: str  # the TOML table; with `key` "" an array of tables (`[[table]]`)
    key: str
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    off: int | None = None  # a value allowed outside the bounds, that turns the thing off
    off_means: str = "off"
    auto: int | None = None  # the value the word `auto` stands for
    rule: Rule | None = None
    note: str = ""  # said after a bound or choice that failed, e.g. "(0: no limit)"
    shown: str = ""  # the default as the reference shows it, where the value reads wrong
    structured: Structured | None = None


@dataclass(frozen=True)
class Declaration:
    """A setting as a whole: its field's name and default, and its declaration."""

    name: str
    default: Any
    declared: Declared

    @property
    def env(self) -> str:
        return env_name(self.name)

    @property
    def flag(self) -> str:
        return flag_name(self.name)


def setting(
    default: T,
    table: str,
    key: str,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
    off: int | None = None,
    off_means: str = "off",
    auto: int | None = None,
    rule: Rule | None = None,
    note: str = "",
    shown: str = "",
    structured: Structured | None = None,
    secret: bool = False,
) -> T:
    """A `Settings` field declared with everything about it; `secret`: kept out of its repr."""
    declared = Declared(
        table, key, help, low, high, choices, off, off_means, auto, rule, note, shown, structured
    )
    made: T = field(default=default, repr=not secret, metadata={_KEY: declared})
    return made


def declarations(settings_type: type[Any]) -> Iterator[Declaration]:
    """Every setting of a `Settings` class (or of a subclass declaring more), in field order."""
    for found in fields(settings_type):
        yield _declaration(found)


def _declaration(found: Field[Any]) -> Declaration:
    if _KEY not in found.metadata or found.default is MISSING:
        raise TypeError(f"{found.name}: a setting is declared with `setting(...)`")
    return Declaration(found.name, found.default, found.metadata[_KEY])


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def problem(name: str, declared: Declared, value: Any) -> str | None:
    """What is wrong with `value` for this setting by its own declaration, or None."""
    if declared.choices and value not in declared.choices:
        return f"{name} must be {_either([repr(c) for c in declared.choices])}"
    if declared.rule is not None and not declared.rule.ok(value):
        return declared.rule.says.format(name=name, value=repr(value))
    if value in (declared.auto, declared.off) or _within(declared, value):
        return None
    return " ".join(filter(None, [f"{name} must be {_bounds(declared)}", declared.note]))


def _within(declared: Declared, value: Any) -> bool:
    low, high = declared.low, declared.high
    return (low is None or value >= low) and (high is None or value <= high)


def _bounds(declared: Declared) -> str:
    low, high = declared.low, declared.high
    ranged = f"in {_number(low)}..{_number(high)}" if high is not None else f">= {_number(low)}"
    auto = declared.auto
    alternatives = ["auto"] if auto is not None and not _within(declared, auto) else []
    if declared.off is not None:
        alternatives.append(f"{declared.off} ({declared.off_means})")
    return _either([*alternatives, ranged])


def _number(bound: float | None) -> str:
    return str(int(bound)) if bound is not None and float(bound).is_integer() else str(bound)


def _either(options: list[str]) -> str:
    """`'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`."""
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
