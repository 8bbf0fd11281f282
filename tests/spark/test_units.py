"""The Spark tier's pure parts: options, schema, jar discovery and job arguments (no JVM)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql.types import BinaryType, LongType, StringType, TimestampType

from adapter.protocol.model import Segment, StreamMeta
from adapter.state.records import encode
from devstack import spark as devstack_spark
from devstack.process import ServiceError
from schemas import load
from spark_streaming import History, Range, connector_jars, history_of, kafka_options, row_schema
from spark_streaming.history import history_offsets
from spark_streaming.jobs import bucket_activity, console
from tests.unit.test_internal_records import GOLDEN

JARS = [
    "commons-pool2-2.12.0.jar",
    "kafka-clients-3.9.0.jar",
    "lz4-java-1.8.0.jar",
    "slf4j-api-1.7.36.jar",
    "spark-avro_2.13-4.0.0.jar",
    "spark-sql-kafka-0-10_2.13-4.0.0.jar",
    "spark-tags_2.13-4.0.0.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
]


def test_options_name_the_buckets_topics() -> None:
    options = kafka_options("k:9092", buckets=["a", "b"], topic_prefix="p.")
    assert options == {
        "kafka.bootstrap.servers": "k:9092",
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",
        "startingOffsets": "earliest",
        "subscribe": "p.bucket.a,p.bucket.b",
        "groupIdPrefix": "p.spark",  # the prefixed Group ACL covers the source's groups
    }
    secured = kafka_options(
        "k:9092", buckets=["a"], client_properties={"security.protocol": "SASL_SSL"}
    )
    assert secured["kafka.security.protocol"] == "SASL_SSL"


def test_options_default_to_every_bucket_topic_and_let_the_caller_override() -> None:
    options = kafka_options(
        "k:9092", starting="latest", ending="latest", options={"maxOffsetsPerTrigger": "10"}
    )
    assert options["subscribePattern"] == r"^durable\-kafka\.bucket\..+$"
    assert "subscribe" not in options
    assert (options["startingOffsets"], options["endingOffsets"]) == ("latest", "latest")
    assert options["maxOffsetsPerTrigger"] == "10"
    with pytest.raises(ValueError, match="at least one bucket"):
        kafka_options("k:9092", buckets=[])


def test_row_schema_is_the_avro_document() -> None:
    schema = row_schema()
    avro = load("stream_row")
    assert [field.name for field in schema] == [field["name"] for field in avro["fields"]]
    types = {field.name: (field.dataType, field.nullable) for field in schema}
    assert types["payload"] == (BinaryType(), False)
    assert types["offset"] == (StringType(), False)
    assert types["json"] == (StringType(), True)
    assert types["producer_epoch"] == (LongType(), True)
    assert types["timestamp"] == (TimestampType(), False)


def test_only_the_jars_pyspark_lacks_are_chosen(tmp_path: Path) -> None:
    for name in JARS:
        (tmp_path / name).touch()
    chosen = [jar.name for jar in devstack_spark.select_missing(tmp_path)]
    assert chosen == [
        "spark-sql-kafka-0-10_2.13-4.0.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
        "kafka-clients-3.9.0.jar",
        "commons-pool2-2.12.0.jar",
        "spark-avro_2.13-4.0.0.jar",
    ]
    (tmp_path / "kafka-clients-3.9.0.jar").unlink()
    with pytest.raises(ServiceError, match="kafka-clients"):
        devstack_spark.select_missing(tmp_path)


def test_the_environment_overrides_the_cached_jars() -> None:
    env = {"DURABLE_KAFKA_SPARK_JARS": "/a/x.jar, /b/y.jar,"}
    assert connector_jars(env) == ["/a/x.jar", "/b/y.jar"]


def test_the_pom_pins_pysparks_version() -> None:
    import pyspark

    assert pyspark.__version__ == devstack_spark.SPARK_VERSION
    pom = devstack_spark.POM.read_text()
    for package in devstack_spark.PACKAGES:
        _group, artifact, version = package.split(":")
        assert f"<artifactId>{artifact}</artifactId>" in pom
        assert version == devstack_spark.SPARK_VERSION


def test_job_arguments_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    args = bucket_activity.parse_args(
        ["--output", "o", "--checkpoint", "c", "--bucket", "a", "--bucket", "b"],
        {"KAFKA_BOOTSTRAP_SERVERS": "h:1"},
    )
    assert (args.bootstrap_servers, args.buckets, args.window) == ("h:1", ["a", "b"], "1 minute")
    assert not args.available_now
    with pytest.raises(SystemExit) as exited:
        bucket_activity.main(["--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for option in ("--output", "--checkpoint", "--window", "--available-now", "--bucket"):
        assert option in text
    assert console.parse_args([], {}).buckets is None
    json.dumps(vars(args))  # plain values only


def test_a_forks_history_is_decoded_from_its_meta_record_and_spans_its_ranges() -> None:
    fork = StreamMeta(
        "shop",
        "fork",
        2,
        "text/plain",
        0,
        40,
        45,
        0,
        0,
        inherited=(Segment("root", 3, 9), Segment("mid", 20, 31)),
    )
    history = history_of(encode(fork))
    assert history == History(
        "shop", "fork", 2, (Range("root", 3, 9), Range("mid", 20, 31), Range("fork", 40, 45))
    )
    starting, ending = history_offsets(history, "p.")
    assert json.loads(starting) == {"p.bucket.shop": {"2": 3}}
    assert json.loads(ending) == {"p.bucket.shop": {"2": -1}}  # the partition's end
    plain = history_of(encode(replace(fork, inherited=())))
    assert plain.ranges == (Range("fork", 40, 45),)


INHERITED = (Range("root", 3, 9), Range("mid", 20, 31))


@pytest.mark.parametrize("name", ["stream_v2", "stream_v3", "stream_v4", "stream_v5"])
def test_a_history_is_read_from_a_meta_record_of_any_format_since_forks(name: str) -> None:
    own = Range("ünï/cödé", 40, 45)
    assert history_of(GOLDEN[name]) == History("shop", "ünï/cödé", 2, (*INHERITED, own))


def test_the_history_of_a_fork_across_buckets_is_in_its_source_buckets_topic() -> None:
    own = Range("shop//ünï/cödé", 40, 45)  # housed in bucket "src": keyed with its own bucket
    assert history_of(GOLDEN["stream"]) == History("src", "ünï/cödé", 2, (*INHERITED, own))


def test_a_history_written_before_forks_is_the_streams_own_records() -> None:
    assert history_of(GOLDEN["stream_v1"]).ranges == (Range("ünï/cödé", 40, 45),)
    with pytest.raises(ValueError, match="unknown format byte"):
        history_of(b"\x09" + GOLDEN["stream"][1:])


def test_jobs_take_the_adapters_client_properties(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_SSL\nsasl.password=from-file\n")
    env = {
        "DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(properties),
        "DURABLE_KAFKA_KAFKA_CLIENT": '{"sasl.password": "from-json"}',
    }
    args = console.parse_args([], env)
    assert args.client_properties == {"security.protocol": "SASL_SSL", "sasl.password": "from-json"}
    assert console.parse_args([], {}).client_properties == {}


def test_a_fork_of_another_buckets_stream_is_read_from_that_buckets_topic() -> None:
    fork = StreamMeta("lab", "try", 2, "text/plain", 0, 40, 45, 0, 0).evolve(
        forked_from="main", source_bucket="shop", home="shop", inherited=(Segment("main", 3, 9),)
    )
    history = history_of(encode(fork))
    assert history == History("shop", "try", 2, (Range("main", 3, 9), Range("lab//try", 40, 45)))
    starting, _ = history_offsets(history, "p.")
    assert json.loads(starting) == {"p.bucket.shop": {"2": 3}}
