"""Blobs in an S3-compatible object store (MinIO, AWS S3, Ceph RGW, ...), with a bounded
local cache keyed by sha256 (app/infra/blob_cache.py), so a host that reads a blob twice
downloads it once, and a host that wrote one does not download it at all.

Objects are `<HINGE_S3_PREFIX><key>` in HINGE_S3_BUCKET (the bucket must exist).
Writes go from a temporary file in the cache's directory (`upload_file`: multipart for
large blobs) and the file then becomes the cache entry. Reads verify the sha256 the
database recorded; a mismatch is an error, never a cached blob.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from app.infra.blob_cache import (
    BlobCache,
    file_sha256,
    remove_stale_parts,
    remove_temporary_blobs,
)
from app.infra.blobs import BlobRef, BlobStore, StoredBlob

if TYPE_CHECKING:
    from app.settings import Settings

NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3BlobStore(BlobStore):
    def __init__(self, settings: Settings) -> None:
        secret = settings.s3_secret_access_key.get_secret_value()
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=settings.s3_endpoint_url or None,
            region_name=settings.s3_region,
            aws_access_key_id=settings.s3_access_key_id or None,
            aws_secret_access_key=secret or None,
            config=Config(retries={"max_attempts": 5, "mode": "standard"},
                          s3={"addressing_style": "path"},
                          connect_timeout=10, read_timeout=120),
        )
        self.bucket = settings.s3_bucket
        self.prefix = settings.s3_prefix
        self.cache = BlobCache(settings.home / "blob-cache", settings.blob_cache_bytes)
        remove_temporary_blobs(self.cache.directory)

    def _object(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def scratch(self, key: str) -> Path:
        # a row shard's `datasets/<id>/p00000-00001.npz`: `<id>-p00000-00001`, unique
        return self.cache.scratch("-".join(Path(key).with_suffix("").parts[1:]))

    def commit(self, key: str, scratch: Path) -> StoredBlob:
        try:
            digest, size = file_sha256(scratch), scratch.stat().st_size
            self.client.upload_file(str(scratch), self.bucket, self._object(key))
            self.cache.adopt(digest, scratch)
        finally:
            scratch.unlink(missing_ok=True)
        return StoredBlob(BlobRef(key, digest), size)

    def open(self, ref: BlobRef) -> BinaryIO:
        if ref.sha256 is None:  # a bare local path of an older row
            return open(ref.key, "rb")

        def fetch(path: Path) -> None:
            try:
                with open(path, "wb") as handle:
                    self.client.download_fileobj(self.bucket, self._object(ref.key), handle)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in NOT_FOUND:
                    raise FileNotFoundError(f"no blob {ref.key!r} in bucket "
                                            f"{self.bucket!r}") from None
                raise

        return self.cache.open(ref.sha256, fetch)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._object(key))

    def keys_older_than(self, prefix: str, cutoff: float) -> list[str]:
        keys = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._object(prefix + "/")):
            for item in page.get("Contents", []):
                if item["LastModified"].timestamp() < cutoff:
                    keys.append(item["Key"][len(self.prefix):])
        return keys

    def remove_stale_scratch(self, prefix: str, cutoff: float) -> list[str]:
        removed = []
        for path in self.cache.directory.glob(".*.partial"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink(missing_ok=True)
                    removed.append(path.name)
            except FileNotFoundError:
                continue
        return removed + remove_stale_parts(self.cache.directory, cutoff)

