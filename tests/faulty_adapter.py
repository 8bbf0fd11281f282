"""`durable-kafka` with test-only faults planted (`adapter.faults_for_tests`), each named by an
environment variable `TEST_FAULT_<FAULT>` (`TEST_FAULT_LOSE_COMMIT_EVERY=10`): the server the
fault suite and the tests that break a real process on purpose start. Run as a script, with
the console script's arguments: `python tests/faulty_adapter.py serve ...`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from adapter.faults_for_tests import PlantedFaults

PREFIX = "TEST_FAULT_"
# The program to run instead of the console script.
COMMAND = [sys.executable, str(Path(__file__).resolve())]


def fault_env(**faults: int | bool) -> dict[str, str]:
    """The environment that plants these faults (named as `PlantedFaults`' fields)."""
    known = {field.name for field in fields(PlantedFaults)}
    assert set(faults) <= known, f"no such fault: {sorted(set(faults) - known)}"
    return {PREFIX + name.upper(): str(value).lower() for name, value in faults.items()}


def plants(env: Mapping[str, str]) -> bool:
    """Whether `env` plants a fault: its server is then this program, not the console script."""
    return any(name.startswith(PREFIX) for name in env)


def planted(env: Mapping[str, str]) -> PlantedFaults:
    """The faults `env` names; a name or value that is none of theirs stops the start."""
    values: dict[str, int | bool] = {}
    names = {PREFIX + field.name.upper(): field.name for field in fields(PlantedFaults)}
    for variable in (v for v in env if v.startswith(PREFIX)):
        if variable not in names:
            raise SystemExit(f"faulty_adapter: {variable} plants no known fault")
        name, raw = names[variable], env[variable]
        default = getattr(PlantedFaults(), name)
        if isinstance(default, bool):
            values[name] = raw == "true"
        else:
            values[name] = int(raw)
    return PlantedFaults(**values)  # type: ignore[arg-type]


if __name__ == "__main__":
    from adapter.cli import main  # here only: the tests importing the rest need none of it

    sys.exit(main(sys.argv[1:], planted(os.environ)))
