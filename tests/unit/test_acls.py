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
    spark_reader_grants,
)

OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


def test_the_documented_commands_are_the_set() -> None:
    for grant in instance_grants("acme.dk.") + mount_grants("orders"):
        assert kafka_acls_commands("User:durable-kafka", [grant]) in OPERATIONS


def test_everything_is_prefixed_and_nothing_is_cluster_wide() -> None:
    grants = instance_grants("acme.dk.")
    assert {g.resource for g in grants} == {TOPIC, GROUP, TRANSACTIONAL_ID}
    assert all(g.prefixed and g.name.startswith("acme.dk.") for g in grants)
    assert "Create" not in instance_grants("p.", manage_topics=False)[0].operations
    assert mount_grants("orders")[0].operations == ("Read",)
    assert not mount_grants("orders")[0].prefixed


def test_a_mount_taking_appends_may_also_write_its_topic() -> None:
    assert mount_grants("orders", appends=True)[0].operations == ("Read", "Write")


def test_delete_is_on_bucket_topics_alone() -> None:
    for manage_topics in (True, False):
        grants = instance_grants("acme.dk.", manage_topics)
        deleting = [g for g in grants if "Delete" in g.operations]
        assert [(g.name, g.operations) for g in deleting] == [("acme.dk.bucket.", ("Delete",))]


def test_a_spark_reader_only_reads() -> None:
    grants = spark_reader_grants("acme.dk.")
    assert {op for g in grants for op in g.operations} == {"Read", "Describe"}
    assert {g.name for g in grants if not g.prefixed} == {
        "acme.dk.internal.meta",
        "acme.dk.internal.tier",
    }
    assert ("Group", "acme.dk.spark", True) in {(g.resource, g.name, g.prefixed) for g in grants}
