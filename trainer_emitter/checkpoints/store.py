"""Where manifests and alarm markers live: the checkpoint directory, local (or FSx) or S3.

Writes are atomic, so a reader sees the old file or the new one, never part of one:

- a local or FSx path: the bytes go to a temporary name in the same directory (a dot name no
  reader lists), are flushed to disk, then renamed over the final name (`os.replace`, atomic on
  POSIX file systems, Lustre included), and the directory entry is flushed;
- S3 (`s3://bucket/prefix`): one `PutObject`, which S3 applies whole or not at all.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Protocol


class Store(Protocol):
    """One checkpoint directory's small files, by name."""

    def names(self) -> list[str]:
        """The names of the files directly in the directory."""
        ...

    def read(self, name: str) -> bytes: ...

    def write(self, name: str, data: bytes) -> None:
        """Replace the file `name` with `data`, atomically."""
        ...

    def delete(self, name: str) -> None: ...

    def where(self, name: str) -> str:
        """The full path or URL of `name`, for messages."""
        ...


class LocalStore:
    """A directory on a local or shared POSIX file system (FSx for Lustre included)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.is_file())

    def read(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()

    def write(self, name: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / name
        temporary = self.directory / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            with open(temporary, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, final)
        finally:
            temporary.unlink(missing_ok=True)
        _sync_directory(self.directory)

    def delete(self, name: str) -> None:
        (self.directory / name).unlink(missing_ok=True)

    def where(self, name: str) -> str:
        return str(self.directory / name)


class S3Store:
    """A prefix in an S3 bucket: `s3://bucket/prefix`. boto3's default credentials and region
    unless a client is given."""

    def __init__(self, url: str, client: Any = None) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"an S3 checkpoint directory needs a bucket: {url!r}")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client

    def names(self) -> list[str]:
        names: list[str] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix, Delimiter="/"
        )
        for page in pages:
            names += [item["Key"][len(self.prefix) :] for item in page.get("Contents", [])]
        return sorted(names)

    def read(self, name: str) -> bytes:
        body = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
        data: bytes = body.read()
        return data

    def write(self, name: str, data: bytes) -> None:
        self.client.put_object(
            Bucket=self.bucket, Key=self.prefix + name, Body=data, ContentType="application/json"
        )

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)

    def where(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{name}"


def open_store(directory: str | os.PathLike[str] | Store) -> Store:
    """The store for a checkpoint directory: `s3://…` on S3, any other path on disk; a store
    given is used as it is."""
    if isinstance(directory, str) and directory.startswith("s3://"):
        return S3Store(directory)
    if isinstance(directory, str | os.PathLike):
        return LocalStore(directory)
    return directory


def _sync_directory(directory: Path) -> None:
    """Flush the rename itself (the directory entry), where the platform allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
