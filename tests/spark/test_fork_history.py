"""A fork's whole history (its sources' ranges, then its own records) read by Spark is what
the HTTP API reads: the same bytes at the same offset tokens, nothing of the sources after
the fork points."""

from __future__ import annotations

from pyspark.sql import SparkSession

from adapter.app import SETTINGS
from adapter.http.keys import STREAMS
from adapter.state.records import encode
from spark_streaming import history_of, read_history
from tests.conftest import Client
from tests.spark.conftest import SPARK_TEST
from tests.spark.test_read_streams import assert_schema

pytestmark = SPARK_TEST

TEXT = {"Content-Type": "text/plain"}


async def _post(client: Client, path: str, body: bytes) -> str:
    response = await client.post(path, data=body, headers=TEXT)
    assert response.status == 204
    return response.headers["Stream-Next-Offset"]


async def test_a_fork_of_a_fork_reads_as_one_dataframe(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str
) -> None:
    bucket = f"fh-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    root, mid, leaf = (f"/{bucket}/{name}" for name in ("root", "mid", "leaf"))
    assert (await client.put(root, headers=TEXT)).status == 201
    cut = await _post(client, root, b"r1")
    await _post(client, root, b"r2")
    fork_at_r1 = {**TEXT, "Stream-Forked-From": root, "Stream-Fork-Offset": cut}
    assert (await client.put(mid, headers=fork_at_r1)).status == 201
    await _post(client, mid, b"m1")
    assert (await client.put(leaf, headers={**TEXT, "Stream-Forked-From": mid})).status == 201
    await _post(client, mid, b"m2")  # after the leaf's fork point
    await _post(client, leaf, b"l1")
    over_http = await client.get(leaf, params={"offset": "-1"})
    assert await over_http.read() == b"r1m1l1"  # not r2, nor m2

    meta = client.app[STREAMS].catalog.stream(bucket, "leaf")
    assert meta is not None
    frame = read_history(
        spark,
        kafka_bootstrap,
        history_of(encode(meta)),
        topic_prefix=client.app[SETTINGS].topic_prefix,
    )
    assert_schema(frame)
    rows = frame.collect()
    payloads = [row.payload for row in rows]
    assert payloads == [b"r1", b"m1", b"l1"]
    assert {row.stream_id for row in rows} == {"leaf"}
    for index, row in enumerate(rows):  # a row's token is where the HTTP API reads it
        rest = await client.get(leaf, params={"offset": row.offset})
        assert await rest.read() == b"".join(payloads[index:])


async def test_a_history_ends_at_its_partitions_end_not_at_the_tail_its_metadata_records(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str
) -> None:
    # A pure append commits its data record alone: the meta topic holds the stream's tail as
    # of its slot owner's last checkpoint, which the appends after it have moved on.
    bucket = f"fe-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/s"
    assert (await client.put(path, headers=TEXT)).status == 201
    await _post(client, path, b"a")
    await _post(client, path, b"b")
    recorded = client.app[STREAMS].catalog.stream(bucket, "s")
    assert recorded is not None
    await _post(client, path, b"c")
    frame = read_history(
        spark,
        kafka_bootstrap,
        history_of(encode(recorded)),
        topic_prefix=client.app[SETTINGS].topic_prefix,
    )
    assert [row.payload for row in frame.collect()] == [b"a", b"b", b"c"]
