"""Remote storage in S3-compatible object storage (`remote.log.storage.manager.class.name=s3`):
AWS S3, MinIO, Ceph, GCS's XML API, or the moto server the tests run on loopback.

Built on obstore (Python bindings of the Rust `object_store` crate used by DataFusion, Delta
and others; decision 0039): native async calls that never hold the event loop, range reads,
multipart uploads straight from a file path, typed stubs, and no boto dependency tree. Objects
are named `<rsm.config.s3.prefix>/<topic>-<partition>/<segment id><suffix>` (`storage.py`).
The client's own retries are kept short: the remote log manager retries whole copies with its
backoff (`remote.log.manager.task.retry.backoff.*`), so a store that is down surfaces as a
RemoteStorageError within seconds instead of a call hanging for minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import S3Store

from .storage import (
    SEGMENT_SUFFIX,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)

DEFAULT_REQUEST_TIMEOUT_MS = 30_000


class S3RemoteStorage:
    """A RemoteStorageManager over one bucket (and prefix). `settings` are the store's keys
    without the impl prefix (`s3.bucket`, `s3.endpoint`, ...; remote_log_config.py). Any number
    of calls may run at once: obstore pools its HTTP connections."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        endpoint = settings.get("s3.endpoint", "")
        timeout = timedelta(
            milliseconds=int(settings.get("s3.request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS))
        )
        config: dict[str, str] = {}
        for key, option in (
            ("s3.endpoint", "endpoint"),
            ("s3.region", "region"),
            ("s3.access.key.id", "access_key_id"),
            ("s3.secret.access.key", "secret_access_key"),
            ("s3.session.token", "session_token"),
        ):
            if settings.get(key):
                config[option] = settings[key]
        self.bucket = settings["s3.bucket"]
        self.prefix = settings.get("s3.prefix", "").strip("/")
        self._store = S3Store(
            self.bucket,
            prefix=self.prefix or None,
            config=config,  # type: ignore[arg-type]  # a TypedDict built key by key
            client_options={
                "allow_http": endpoint.startswith("http://"),
                "timeout": timeout,
                "connect_timeout": min(timeout, timedelta(seconds=5)),
            },
            retry_config={
                "max_retries": 2,
                "retry_timeout": timeout,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=1),
                    "base": 2,
                },
            },
        )

    async def copy_log_segment_data(
        self, segment_id: RemoteLogSegmentId, data: LogSegmentData
    ) -> None:
        for suffix, source in data.files():
            name = segment_id.object_name(suffix)
            try:
                await obstore.put_async(self._store, name, source)
            except (BaseError, OSError) as exc:
                raise RemoteStorageError(f"copy of {segment_id}{suffix} failed: {exc}") from exc

    async def fetch_log_segment(
        self, segment_id: RemoteLogSegmentId, start_position: int, end_position: int | None = None
    ) -> bytes:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad range [{start_position}, {end_position})")
        if end_position == start_position:
            return b""
        name = segment_id.object_name(SEGMENT_SUFFIX)
        try:
            if end_position is None:
                result = await obstore.get_async(
                    self._store, name, options={"range": {"offset": start_position}}
                )
                return bytes(await result.bytes_async())
            return bytes(
                await obstore.get_range_async(
                    self._store, name, start=start_position, end=end_position
                )
            )
        except (NotFoundError, FileNotFoundError):
            raise RemoteResourceNotFoundError(
                f"remote object {segment_id}.log is missing"
            ) from None
        except BaseError as exc:
            # A range starting at or past the end is refused by S3 (416): that is an empty read.
            if await self._size(name, segment_id) <= start_position:
                return b""
            raise RemoteStorageError(f"read of {segment_id}.log failed: {exc}") from exc

    async def _size(self, name: str, segment_id: RemoteLogSegmentId) -> int:
        try:
            meta = await obstore.head_async(self._store, name)
        except (NotFoundError, FileNotFoundError):
            raise RemoteResourceNotFoundError(
                f"remote object {segment_id}.log is missing"
            ) from None
        except BaseError as exc:
            raise RemoteStorageError(f"head of {segment_id}.log failed: {exc}") from exc
        return int(meta["size"])

    async def fetch_index(self, segment_id: RemoteLogSegmentId, index_type: IndexType) -> bytes:
        name = segment_id.object_name(index_type.value)
        try:
            result = await obstore.get_async(self._store, name)
            return bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError):
            raise RemoteResourceNotFoundError(
                f"remote object {segment_id}{index_type.value} is missing"
            ) from None
        except BaseError as exc:
            raise RemoteStorageError(
                f"read of {segment_id}{index_type.value} failed: {exc}"
            ) from exc

    async def delete_log_segment_data(self, segment_id: RemoteLogSegmentId) -> None:
        # The .log first (see directory.py); S3 deletes of missing keys succeed.
        names = [segment_id.object_name(s) for s in (SEGMENT_SUFFIX, *(t.value for t in IndexType))]
        try:
            await obstore.delete_async(self._store, names[0])
            await obstore.delete_async(self._store, names[1:])
        except (NotFoundError, FileNotFoundError):
            return
        except BaseError as exc:
            raise RemoteStorageError(f"delete of {segment_id} failed: {exc}") from exc

    async def put_if_absent(self, name: str, data: bytes) -> bool:
        try:
            await obstore.put_async(self._store, name, data, mode="create")
        except AlreadyExistsError:
            return False
        except PreconditionError:
            return False
        except BaseError as exc:
            raise RemoteStorageError(f"write of {name} failed: {exc}") from exc
        return True

    async def get_object(self, name: str) -> bytes | None:
        try:
            result = await obstore.get_async(self._store, name)
            return bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError):
            return None
        except BaseError as exc:
            raise RemoteStorageError(f"read of {name} failed: {exc}") from exc

    async def list_objects(self, under: str = "") -> list[str]:
        try:
            chunks = await asyncio.to_thread(
                lambda: list(obstore.list(self._store, prefix=under or None))
            )
        except BaseError as exc:
            raise RemoteStorageError(f"list of {under or '/'} failed: {exc}") from exc
        return sorted(meta["path"] for chunk in chunks for meta in chunk)

    async def delete_objects(self, names: list[str]) -> None:
        if not names:
            return
        try:
            await obstore.delete_async(self._store, names)
        except (NotFoundError, FileNotFoundError):
            return
        except BaseError as exc:
            raise RemoteStorageError(f"delete of {len(names)} objects failed: {exc}") from exc

    async def delete_incomplete_objects(self, under: str) -> int:
        return 0  # a put is whole or absent; an interrupted multipart upload is for the bucket's
        # lifecycle rule (AbortIncompleteMultipartUpload)

    async def close(self) -> None:
        return None
