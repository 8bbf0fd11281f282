"""A stream's whole history as one batch DataFrame: for a fork, the ranges of its sources it
inherits (recursively), then its own records.

A fork lives in its source's partition and copies nothing: its history is a list of ranges of
that partition, each the records of one stream id between two Kafka offsets, recorded in its
metadata (`schemas/stream_meta.avsc`, field `inherited`). `history_of` decodes a value of the
compacted meta topic into that list; `read_history` reads just the partition from the
first range's start and keeps the records inside a range.

The last range, the stream's own records, ends at the partition's end, not at the tail its
metadata records: a pure append commits its data record alone and the stream's metadata reaches
the meta topic only at its slot owner's next checkpoint (`slot_checkpoint_ms`), so the records
after that tail are the stream's too. The batch ends at the partition's last stable offset when
the read starts (Spark's `latest`, read_committed), as the HTTP API's reads carry a stream
forward to its partition's end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import reduce
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_streaming.source import decode_streams, kafka_options
from topology.internal_records import RecordKind, decode_value
from topology.naming import DEFAULT_PREFIX, bucket_topic
from topology.wire import housed_key

LATEST = -1  # Spark's per-partition `endingOffsets` for the partition's end


class Range(NamedTuple):
    """The records keyed `stream_id` at Kafka offsets [start, end) of the stream's partition."""

    stream_id: str
    start: int
    end: int  # the stream's own range: the tail its metadata records; read to the partition's end


class History(NamedTuple):
    bucket: str  # whose topic holds the records (a fork across buckets: its source's)
    stream_id: str
    partition: int
    ranges: tuple[Range, ...]  # in offset order; the last is the stream's own records


def history_of(meta_value: bytes) -> History:
    """The history of the stream whose meta-topic value (key `stream:{bucket}/{id}`) this is;
    ValueError if it is not a stream's metadata in a known format."""
    meta = decode_value(RecordKind.STREAM_META, meta_value)
    inherited = [Range(r["stream_id"], r["start"], r["end"]) for r in meta["inherited"]]
    home = meta["home"]  # a fork across buckets: its records are its source's bucket's
    key = housed_key(meta["bucket_id"], meta["stream_id"], home)
    own = Range(key, meta["start_offset"], meta["next_offset"])
    bucket = meta["bucket_id"] if home is None else home
    return History(bucket, meta["stream_id"], meta["partition"], (*inherited, own))


def history_offsets(history: History, topic_prefix: str = DEFAULT_PREFIX) -> tuple[str, str]:
    """Spark's `startingOffsets` and `endingOffsets` (JSON) spanning the history: from the
    first range's start to the partition's end (-1: `latest`, its last stable offset when the
    read starts), where the stream's own records end."""
    topic = bucket_topic(topic_prefix, history.bucket)
    partition = str(history.partition)
    start = history.ranges[0].start
    return json.dumps({topic: {partition: start}}), json.dumps({topic: {partition: LATEST}})


def in_history(history: History) -> Column:
    """True for a decoded row inside one of the history's ranges (the last, the stream's own
    records, open at its end)."""
    *inherited, own = history.ranges
    return reduce(
        lambda either, other: either | other,
        (
            *(
                (F.col("stream_id") == F.lit(r.stream_id))
                & (F.col("kafka_offset") >= F.lit(r.start))
                & (F.col("kafka_offset") < F.lit(r.end))
                for r in inherited
            ),
            (F.col("stream_id") == F.lit(own.stream_id))
            & (F.col("kafka_offset") >= F.lit(own.start)),
        ),
    )


def read_history(
    spark: SparkSession,
    bootstrap_servers: str,
    history: History,
    *,
    topic_prefix: str = DEFAULT_PREFIX,
    options: Mapping[str, str] | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> DataFrame:
    """The stream's messages in history order, as rows of the stream (its id on every row),
    at the same offset tokens the HTTP API answers with."""
    starting, ending = history_offsets(history, topic_prefix)
    chosen = kafka_options(
        bootstrap_servers,
        buckets=[history.bucket],
        topic_prefix=topic_prefix,
        starting=starting,
        ending=ending,
        client_properties=client_properties,
    )
    # Only the stream's partition: offsets given for one partition need it assigned alone.
    del chosen["subscribe"]
    chosen["assign"] = json.dumps({bucket_topic(topic_prefix, history.bucket): [history.partition]})
    chosen.update(options or {})
    raw = spark.read.format("kafka").options(**chosen).load()
    rows = decode_streams(raw, topic_prefix).where(in_history(history))
    return rows.withColumn("stream_id", F.lit(history.stream_id)).orderBy("kafka_offset")
