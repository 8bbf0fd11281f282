"""The example job, run end to end on a small stream: Parquet metrics, resumed by checkpoint."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession

from adapter.app import SETTINGS
from spark_streaming.jobs import bucket_activity
from tests.conftest import Client
from tests.spark.conftest import SPARK_TEST

pytestmark = SPARK_TEST


async def post(client: Client, path: str, body: bytes, content_type: str) -> str:
    response = await client.post(path, data=body, headers={"Content-Type": content_type})
    assert response.status in (201, 204), await response.text()
    return response.headers["Stream-Next-Offset"]


async def test_bucket_activity_writes_per_stream_metrics_and_resumes(
    spark: SparkSession, client: Client, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = client.app[SETTINGS].topic_prefix
    bucket, other = f"job-{unique}", f"skip-{unique}"
    for name in (bucket, other):
        assert (await client.put(f"/{name}")).status == 201
    json_ct, binary = "application/json", "application/octet-stream"
    assert (await client.put(f"/{bucket}/clicks", headers={"Content-Type": json_ct})).status == 201
    await post(client, f"/{bucket}/clicks", b'[{"n":1},{"n":2},{"n":3}]', json_ct)
    assert (
        await client.put(f"/{bucket}/blobs", data=b"12345", headers={"Content-Type": binary})
    ).status == 201
    await post(client, f"/{bucket}/blobs", b"678", binary)
    assert (await client.put(f"/{other}/x", data=b"ignored")).status == 201

    output, checkpoint = tmp_path / "activity", tmp_path / "checkpoint"
    argv = [
        "--bootstrap-servers", kafka_bootstrap,
        "--topic-prefix", prefix,
        "--bucket", bucket,
        "--output", str(output),
        "--checkpoint", str(checkpoint),
        "--window", "1 day",
        "--available-now",
    ]  # fmt: skip
    args = bucket_activity.parse_args(argv, {})
    bucket_activity.run(spark, args)

    rows = spark.read.parquet(str(output)).collect()
    assert {row["batch_id"] for row in rows} == {0}
    per_stream = {row["stream_id"]: row for row in rows}  # one window: all within seconds
    assert set(per_stream) == {"clicks", "blobs"}
    clicks, blobs = per_stream["clicks"], per_stream["blobs"]
    assert (clicks["messages"], clicks["bytes"], clicks["json_messages"]) == (3, 21, 3)
    assert (blobs["messages"], blobs["bytes"], blobs["json_messages"]) == (2, 8, 0)
    assert all(row["bucket"] == bucket for row in rows)
    # Offsets are the HTTP API's tokens: reading at the last one gives the last message.
    last = await client.get(f"/{bucket}/blobs", params={"offset": blobs["last_offset"]})
    assert await last.read() == b"678"
    first = await client.get(f"/{bucket}/clicks", params={"offset": clicks["first_offset"]})
    assert await first.json() == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert isinstance(clicks["window_start"], datetime)
    assert clicks["window_start"] <= clicks["first_at"] <= clicks["last_at"] < clicks["window_end"]

    # A second run resumes from the checkpoint: only the new message is counted, once.
    await post(client, f"/{bucket}/blobs", b"9", binary)
    bucket_activity.run(spark, args)
    again = spark.read.parquet(str(output))
    assert sorted({row["batch_id"] for row in again.collect()}) == [0, 1]
    summary = bucket_activity.summarize(spark, str(output)).collect()
    assert len(summary) in (1, 2)  # two only if the day turned between the appends
    assert sum(row["messages"] for row in summary) == 6
    assert sum(row["bytes"] for row in summary) == 30
    assert sum(row["json_messages"] for row in summary) == 3
    assert max(row["streams"] for row in summary) <= 2
