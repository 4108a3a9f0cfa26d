"""Where an import's part files are (POST /v1/imports; app.domain.services.imports): URLs
resolved into a list of parts with their sizes, and the bytes of one part.

Two kinds of source:
- `s3://bucket/key` in the S3 store the settings configure (HINGE_S3_ENDPOINT_URL and its
  keys); a key with glob characters (`*`, `?`, `[`) lists the bucket under the key's part
  before the first of them and keeps the keys the glob matches (`fnmatch`, `*` crosses
  `/` as it does in S3 listings). Sizes come from the listing or a HEAD. The blob store's
  own objects (HINGE_S3_BUCKET under HINGE_S3_PREFIX) are never a source: they are other
  tenants' datasets.
- `file:///absolute/path` under a directory of HINGE_IMPORT_ROOTS (none by default). A
  path with a `..` component is refused; every file (a glob's matches too) is resolved to
  its real path, and one that is not under a root's real path (a symlink pointing out)
  is refused. Nothing is opened before the whole source is resolved: a refused source
  has read nothing. Sizes come from stat.

`SourceError` says what is wrong with a source (the service answers 422 with it).
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from app.settings import Settings

READ_BYTES = 1 << 20
GLOB_CHARS = "*?["


class SourceError(ValueError):
    """A source that cannot be imported; `reason` is a code ("outside_roots", ...)."""

    def __init__(self, message: str, reason: str, uri: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.uri = uri


@dataclass(frozen=True)
class PartFile:
    uri: str  # s3://bucket/key or file:///real/path
    size: int  # bytes as stored


def s3_client(settings: Settings) -> Any:
    import boto3
    from botocore.config import Config

    secret = settings.s3_secret_access_key.get_secret_value()
    return boto3.client(
        "s3", endpoint_url=settings.s3_endpoint_url or None, region_name=settings.s3_region,
        aws_access_key_id=settings.s3_access_key_id or None,
        aws_secret_access_key=secret or None,
        config=Config(retries={"max_attempts": 5, "mode": "standard"},
                      s3={"addressing_style": "path"}, connect_timeout=10, read_timeout=120))


def _has_glob(text: str) -> bool:
    return any(c in text for c in GLOB_CHARS)


def _s3_parts(settings: Settings, uri: str, client: Any, max_parts: int) -> list[PartFile]:
    from botocore.exceptions import BotoCoreError, ClientError

    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key:
        raise SourceError(f"{uri!r}: an S3 source is s3://bucket/key", "malformed", uri)
    if (settings.blob_backend == "s3" and bucket == settings.s3_bucket
            and key.startswith(settings.s3_prefix)):
        raise SourceError(f"{uri!r}: the service's own blob store is not a source",
                          "forbidden", uri)
    try:
        if not _has_glob(key):
            head = client.head_object(Bucket=bucket, Key=key)
            return [PartFile(f"s3://{bucket}/{key}", int(head["ContentLength"]))]
        prefix = key[:min(key.index(c) for c in GLOB_CHARS if c in key)]
        found: list[PartFile] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                      Prefix=prefix):
            for item in page.get("Contents", []):
                if fnmatch.fnmatchcase(item["Key"], key):
                    found.append(PartFile(f"s3://{bucket}/{item['Key']}", int(item["Size"])))
                    if len(found) > max_parts:
                        return found
        return sorted(found, key=lambda p: p.uri)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise SourceError(f"{uri!r}: the S3 store answered {code or 'an error'}",
                          "unreadable", uri) from None
    except BotoCoreError as exc:
        raise SourceError(f"{uri!r}: the S3 store cannot be reached ({type(exc).__name__})",
                          "unreachable", uri) from None


def _roots(settings: Settings) -> list[str]:
    return [os.path.realpath(root) for root in settings.import_roots]


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(os.path.commonpath([path, root]) == root for root in roots)


def _file_parts(settings: Settings, uri: str, max_parts: int) -> list[PartFile]:
    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        raise SourceError(f"{uri!r}: a file source is file:///absolute/path", "malformed",
                          uri)
    path = unquote(parsed.path)
    roots = _roots(settings)
    if not roots:
        raise SourceError("file imports are off on this service (HINGE_IMPORT_ROOTS is "
                          "empty)", "outside_roots", uri)
    if not os.path.isabs(path) or ".." in path.split("/") or "\x00" in path:
        raise SourceError(f"{uri!r}: a file source is an absolute path without '..'",
                          "outside_roots", uri)
    # the part before any glob character must itself lie under a root
    fixed = path if not _has_glob(path) else os.path.dirname(
        path[:min(path.index(c) for c in GLOB_CHARS if c in path)] + "x")
    if not _under(os.path.realpath(fixed), roots):
        raise SourceError(f"{uri!r} is outside the directories this service imports from "
                          "(HINGE_IMPORT_ROOTS)", "outside_roots", uri)
    matches = sorted(glob.glob(path)) if _has_glob(path) else [path]
    found = []
    for match in matches[:max_parts + 1]:
        real = os.path.realpath(match)
        if not _under(real, roots):
            raise SourceError(f"{match!r} leads outside the directories this service "
                              "imports from (HINGE_IMPORT_ROOTS)", "outside_roots", uri)
        try:
            info = os.stat(real)
        except OSError:
            raise SourceError(f"{match!r}: no such file", "missing", uri) from None
        if not os.path.isfile(real):
            if _has_glob(path):
                continue
            raise SourceError(f"{match!r} is not a file", "missing", uri)
        found.append(PartFile(f"file://{real}", int(info.st_size)))
    return found


def resolve(settings: Settings, sources: Sequence[str], max_parts: int) -> list[PartFile]:
    """The part files of `sources` in order (each glob's matches sorted); SourceError for
    a source that is refused, matches nothing, or makes more than `max_parts` parts."""
    parts: list[PartFile] = []
    client = None
    for uri in sources:
        scheme = urlparse(uri).scheme
        if scheme == "s3":
            client = client or s3_client(settings)
            found = _s3_parts(settings, uri, client, max_parts)
        elif scheme == "file":
            found = _file_parts(settings, uri, max_parts)
        else:
            raise SourceError(f"{uri!r}: a source is s3://bucket/key or file:///path",
                              "malformed", uri)
        if not found:
            raise SourceError(f"{uri!r} matches no file", "missing", uri)
        parts.extend(found)
        if len(parts) > max_parts:
            raise SourceError(f"the source has more than {max_parts} parts "
                              "(HINGE_IMPORT_MAX_PARTS)", "too_many_parts", uri)
    return parts


def read_part(settings: Settings, uri: str, client: Any = None) -> Iterator[bytes]:
    """The bytes of one part, about READ_BYTES at a time. A file part is checked against
    the roots again (they may have changed since the import was accepted)."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        client = client or s3_client(settings)
        body = client.get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))["Body"]
        try:
            yield from body.iter_chunks(READ_BYTES)
        finally:
            body.close()
        return
    path = unquote(parsed.path)
    real = os.path.realpath(path)
    if not _under(real, _roots(settings)):
        raise SourceError(f"{uri!r} is outside HINGE_IMPORT_ROOTS", "outside_roots", uri)
    with open(real, "rb") as handle:
        while chunk := handle.read(READ_BYTES):
            yield chunk
