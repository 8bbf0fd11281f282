"""Choosing the object store from the settings."""

from __future__ import annotations

from pathlib import Path

from adapter.config import Settings
from adapter.objects.base import ObjectStore
from adapter.objects.local import LocalObjectStore
from adapter.objects.s3 import S3ObjectStore


def object_store(settings: Settings) -> ObjectStore:
    if settings.cold_backend == "fs":
        return LocalObjectStore(Path(settings.cold_dir))
    return S3ObjectStore(
        bucket=settings.s3_bucket,
        timeout_s=settings.kafka_timeout_s,
        endpoint_url=settings.s3_endpoint_url,
        region=settings.s3_region,
        access_key_id=settings.s3_access_key_id,
        secret_access_key=settings.s3_secret_access_key,
    )
