"""The test suites' faults reach a server only through tests/faulty_adapter.py's variables."""

from __future__ import annotations

import pytest

from adapter.faults_for_tests import NO_FAULTS, PlantedFaults
from tests.faulty_adapter import fault_env, planted, plants


def test_the_variables_plant_the_faults_they_name() -> None:
    env = fault_env(lose_commit_every=10, trust_unknown_outcomes=True)
    assert env == {
        "TEST_FAULT_LOSE_COMMIT_EVERY": "10",
        "TEST_FAULT_TRUST_UNKNOWN_OUTCOMES": "true",
    }
    faults = planted(env | {"DURABLE_KAFKA_PARTITIONS": "3"})
    assert faults == PlantedFaults(lose_commit_every=10, trust_unknown_outcomes=True)
    assert faults.any
    assert faults.writer_faults().every == 10
    assert plants(env)


def test_no_variable_plants_nothing() -> None:
    assert planted({"DURABLE_KAFKA_LOSE_COMMIT_EVERY": "10"}) == NO_FAULTS
    assert not plants({"DURABLE_KAFKA_TRUST_UNKNOWN_OUTCOMES": "true"})
    assert not NO_FAULTS.any


def test_a_variable_naming_no_fault_stops_the_start() -> None:
    with pytest.raises(SystemExit, match="TEST_FAULT_LOSE_EVERYTHING"):
        planted({"TEST_FAULT_LOSE_EVERYTHING": "1"})
