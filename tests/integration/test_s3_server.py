"""The S3 server is real: boto3 round-trips objects, and our S3 object store works against it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import boto3
import pytest
from botocore.exceptions import ClientError

from adapter.objects.s3 import PART_BYTES, S3ObjectStore
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


async def _chunks(data: bytes, size: int, fail_after: int | None = None) -> AsyncIterator[bytes]:
    """`data` in pieces of `size`; with `fail_after`, raise once that many bytes were given."""
    for start in range(0, len(data), size):
        if fail_after is not None and start >= fail_after:
            raise RuntimeError("the client went away")
        yield data[start : start + size]


def _uploads(store: S3ObjectStore, key: str) -> list[str]:
    """The multipart uploads of `key` begun and neither completed nor aborted."""
    reply = store._client.list_multipart_uploads(Bucket=store.bucket, Prefix=key)
    return [upload["UploadId"] for upload in reply.get("Uploads", [])]


async def test_a_streamed_object_goes_up_in_parts(store: S3ObjectStore) -> None:
    await store.check()
    big = bytes(range(256)) * ((2 * PART_BYTES + 12345) // 256)  # three parts
    await store.put_stream("blobs/big", _chunks(big, 256 * 1024))
    await store.put_stream("blobs/small", _chunks(b"tiny", 3))  # under one part: one PUT
    await store.put_stream("blobs/empty", _chunks(b"", 1))
    assert await store.get("blobs/big") == big
    assert (
        await store.get("blobs/big", PART_BYTES - 2, PART_BYTES + 2)
        == big[PART_BYTES - 2 : PART_BYTES + 2]
    )
    assert await store.get("blobs/small") == b"tiny"
    assert await store.get("blobs/empty") == b""
    assert _uploads(store, "blobs/big") == []


async def test_an_interrupted_stream_leaves_no_object_and_no_upload(store: S3ObjectStore) -> None:
    await store.check()
    big = b"z" * (3 * PART_BYTES)
    with pytest.raises(RuntimeError, match="went away"):  # after two parts were sent
        await store.put_stream("blobs/half", _chunks(big, 1024 * 1024, 2 * PART_BYTES + 1))
    with pytest.raises(RuntimeError, match="went away"):  # before the first part was full
        await store.put_stream("blobs/early", _chunks(big, 1024 * 1024, 1024 * 1024))
    assert await store.keys("blobs/") == []
    assert _uploads(store, "blobs/half") == []
