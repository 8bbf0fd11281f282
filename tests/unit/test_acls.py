"""The ACL set as docs/operations.md gives it is the set `topology/acls.py` holds (which the
integration tier grants and removes operation by operation)."""

from __future__ import annotations

from pathlib import Path

from topology.acls import (
    GROUP,
    TOPIC,
    TRANSACTIONAL_ID,
    instance_grants,
    kafka_acls_commands,
    mount_grants,
    strimzi_acls,
)

OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


def test_the_documented_commands_and_kafka_user_are_the_set() -> None:
    grants = instance_grants("acme.dk.")
    assert kafka_acls_commands("User:durable-kafka", grants) in OPERATIONS
    assert kafka_acls_commands("User:durable-kafka", mount_grants("orders")) in OPERATIONS
    assert strimzi_acls(grants + mount_grants("orders")) in OPERATIONS


def test_everything_is_prefixed_and_nothing_is_cluster_wide() -> None:
    grants = instance_grants("acme.dk.")
    assert {g.resource for g in grants} == {TOPIC, GROUP, TRANSACTIONAL_ID}
    assert all(g.prefixed and g.name == "acme.dk." for g in grants)
    assert "Create" not in instance_grants("p.", manage_topics=False)[0].operations
    assert mount_grants("orders")[0].operations == ("Read",)
    assert not mount_grants("orders")[0].prefixed


def test_a_mount_taking_appends_may_also_write_its_topic() -> None:
    assert mount_grants("orders", appends=True)[0].operations == ("Read", "Write")
