"""Objects in an S3 bucket (MinIO, AWS or any S3-compatible server) through boto3."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import TYPE_CHECKING, Final, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from adapter.objects.base import Fetched, ObjectStoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

log = logging.getLogger(__name__)
T = TypeVar("T")
# A streamed object, or a `put` of more than this, is sent in parts of this size (the default;
# S3 wants >= 5 MiB but the last): one part is held in memory at a time; an object smaller
# than one part is one PUT.
PART_BYTES: Final = 8 * 1024 * 1024
_MISSING = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}


class S3ObjectStore:
    """boto3 is blocking, so each call runs in a worker thread under a deadline."""

    def __init__(
        self,
        bucket: str,
        timeout_s: float,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        part_bytes: int = PART_BYTES,
    ) -> None:
        self.bucket = bucket
        self.part_bytes = part_bytes
        self.timeout_s = timeout_s
        self.fetched = Fetched()
        # Credentials left unset fall through to boto3's own chain (env, profile, IAM role).
        self._client: S3Client = boto3.client(
            "s3",
            endpoint_url=endpoint_url or None,
            region_name=region,
            aws_access_key_id=access_key_id or None,
            aws_secret_access_key=secret_access_key or None,
            config=Config(
                connect_timeout=timeout_s,
                read_timeout=timeout_s,
                retries={"max_attempts": 2, "mode": "standard"},
                s3={"addressing_style": "path"},
            ),
        )

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn), self.timeout_s * 3)
        except TimeoutError as error:
            raise ObjectStoreError(f"S3 {what}: timed out", retriable=True) from error
        except ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            retriable = status >= 500 or status == 429
            raise ObjectStoreError(f"S3 {what}: {error}", retriable=retriable) from error
        except BotoCoreError as error:
            raise ObjectStoreError(f"S3 {what}: {error}", retriable=True) from error

    async def check(self) -> None:
        """Create the bucket if it does not exist yet, so a fresh MinIO works at once."""
        try:
            await self._call("head bucket", lambda: self._client.head_bucket(Bucket=self.bucket))
        except ObjectStoreError as error:
            if (
                not isinstance(error.__cause__, ClientError)
                or _code(error.__cause__) not in _MISSING
            ):
                raise
            await self._call(
                "create bucket", lambda: self._client.create_bucket(Bucket=self.bucket)
            )

    async def put(self, key: str, data: bytes) -> None:
        """One PUT, or a multipart upload (`put_stream`) when `data` is over a part."""
        if len(data) > self.part_bytes:
            await self.put_stream(key, _pieces(data, self.part_bytes))
            return
        await self._call(
            f"put {key}", lambda: self._client.put_object(Bucket=self.bucket, Key=key, Body=data)
        )

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> None:
        """A multipart upload, part by part; S3 shows the object only once it is completed,
        and an upload that fails or is cancelled is aborted (its parts deleted)."""
        upload = _Multipart(self, key)
        try:
            buffer = bytearray()
            async for chunk in chunks:
                buffer += chunk
                if len(buffer) >= self.part_bytes:
                    await upload.send(bytes(buffer))
                    buffer.clear()
            if upload.started:
                await upload.finish(bytes(buffer))
            else:
                await self.put(key, bytes(buffer))
        except BaseException:
            await upload.abort()
            raise

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        if end is not None and end <= start:
            return b""
        ranged = start > 0 or end is not None
        byte_range = f"bytes={start}-{'' if end is None else end - 1}"

        def fetch() -> bytes:
            if ranged:
                reply = self._client.get_object(Bucket=self.bucket, Key=key, Range=byte_range)
            else:
                reply = self._client.get_object(Bucket=self.bucket, Key=key)
            return reply["Body"].read()

        try:
            data = await self._call(f"get {key}", fetch)
        except ObjectStoreError as error:
            if isinstance(error.__cause__, ClientError) and _code(error.__cause__) in _MISSING:
                return None
            raise
        self.fetched.count(data, ranged)
        return data

    async def delete(self, key: str) -> None:
        await self._call(
            f"delete {key}", lambda: self._client.delete_object(Bucket=self.bucket, Key=key)
        )

    async def keys(self, prefix: str) -> list[str]:
        def list_all() -> list[str]:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            return [item["Key"] for page in pages for item in page.get("Contents", [])]

        return sorted(await self._call(f"list {prefix}", list_all))


class _Multipart:
    """One multipart upload of `key`, begun with its first part."""

    def __init__(self, store: S3ObjectStore, key: str) -> None:
        self.store, self.key = store, key
        self.upload_id: str | None = None
        self.parts: list[CompletedPartTypeDef] = []

    @property
    def started(self) -> bool:
        return self.upload_id is not None

    async def send(self, data: bytes) -> None:
        client, bucket, key = self.store._client, self.store.bucket, self.key
        if self.upload_id is None:
            reply = await self.store._call(
                f"start upload {key}",
                lambda: client.create_multipart_upload(Bucket=bucket, Key=key),
            )
            self.upload_id = reply["UploadId"]
        upload_id, number = self.upload_id, len(self.parts) + 1
        part = await self.store._call(
            f"upload {key} part {number}",
            lambda: client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data
            ),
        )
        self.parts.append({"ETag": part["ETag"], "PartNumber": number})

    async def finish(self, last: bytes) -> None:
        if last:
            await self.send(last)
        client, bucket, key = self.store._client, self.store.bucket, self.key
        upload_id, parts = self.upload_id or "", self.parts
        await self.store._call(
            f"complete upload {key}",
            lambda: client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            ),
        )
        self.upload_id = None  # done: nothing to abort

    async def abort(self) -> None:
        """Best effort: an upload left behind is invisible, and a bucket lifecycle rule
        (AbortIncompleteMultipartUpload) deletes its parts."""
        if self.upload_id is None:
            return
        client, bucket, key, upload_id = (
            self.store._client,
            self.store.bucket,
            self.key,
            self.upload_id,
        )
        self.upload_id = None
        try:
            await self.store._call(
                f"abort upload {key}",
                lambda: client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id),
            )
        except ObjectStoreError as error:
            log.warning("multipart upload of %s not aborted: %s", key, error)


async def _pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
