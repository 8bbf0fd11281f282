"""The S3 server is real: boto3 round-trips objects, and our S3 object store works against it."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from adapter.objects.s3 import S3ObjectStore
from tests.services import S3Server


def test_boto3_round_trip(s3: S3Server, unique: str) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        region_name="us-east-1",
    )
    bucket = f"roundtrip-{unique}"
    client.create_bucket(Bucket=bucket)
    body = bytes(range(256)) * 64
    client.put_object(Bucket=bucket, Key="a/b.bin", Body=body)
    assert client.get_object(Bucket=bucket, Key="a/b.bin")["Body"].read() == body
    ranged = client.get_object(Bucket=bucket, Key="a/b.bin", Range="bytes=10-19")
    assert ranged["Body"].read() == body[10:20]
    with pytest.raises(ClientError) as raised:
        client.put_object(Bucket=bucket, Key="a/b.bin", Body=b"x", IfNoneMatch="*")
    assert raised.value.response["Error"]["Code"] == "PreconditionFailed"


@pytest.fixture
def store(s3: S3Server, unique: str) -> S3ObjectStore:
    return S3ObjectStore(
        bucket=f"store-{unique}",
        timeout_s=5,
        endpoint_url=s3.endpoint_url,
        access_key_id=s3.access_key_id,
        secret_access_key=s3.secret_access_key,
    )


async def test_object_store_creates_bucket_and_round_trips(store: S3ObjectStore) -> None:
    await store.check()  # creates the bucket
    await store.check()  # and finds it the second time
    await store.put("chunks/0001", b"0123456789")
    await store.put("chunks/0002", b"abc")
    assert await store.get("chunks/0001") == b"0123456789"
    assert await store.get("chunks/0001", 2, 5) == b"234"
    assert await store.get("chunks/0001", 7) == b"789"
    assert await store.get("chunks/missing") is None
    assert await store.keys("chunks/") == ["chunks/0001", "chunks/0002"]
    await store.delete("chunks/0001")
    assert await store.keys("chunks/") == ["chunks/0002"]
