"""Remote storage in a directory (`remote.log.storage.manager.class.name=directory`): a local
disk for tests and single-machine users, or a shared filesystem (NFS, a mounted bucket) that
every node of the cluster sees at the same path.

Layout: `<rsm.config.dir>/<prefix>/<topic>-<partition>/<segment id><suffix>`, one file per
object (`storage.py`). Each file is written to a temporary name (`.<name>.<random>.tmp`, never
listed), fsynced and renamed (or hard-linked: `put_if_absent`), so a reader sees a whole object
or none. What a writer killed in between leaves is removed by the next delete of its segment
(data) or by `delete_incomplete_objects` when the partition's next leader starts (metadata).
File I/O runs in worker threads (`asyncio.to_thread`): the event loop that serves the tail
never waits on a slow disk or a hung mount.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from pathlib import Path

from .storage import (
    SEGMENT_SUFFIX,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)


class DirectoryRemoteStorage:
    """A RemoteStorageManager over a directory tree. Stateless besides its root: any number of
    calls may run at once (each writes its own temporary files)."""

    def __init__(self, root: Path, prefix: str = "") -> None:
        self.root = Path(root) / prefix.strip("/") if prefix.strip("/") else Path(root)

    def path_of(self, segment_id: RemoteLogSegmentId, suffix: str) -> Path:
        return self.root / segment_id.object_name(suffix)

    async def copy_log_segment_data(
        self, segment_id: RemoteLogSegmentId, data: LogSegmentData
    ) -> None:
        await asyncio.to_thread(self._copy, segment_id, data)

    def _copy(self, segment_id: RemoteLogSegmentId, data: LogSegmentData) -> None:
        for suffix, source in data.files():
            target = self.path_of(segment_id, suffix)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
                try:
                    if isinstance(source, Path):
                        shutil.copyfile(source, tmp)
                    else:
                        tmp.write_bytes(source)
                    with tmp.open("rb+") as f:
                        os.fsync(f.fileno())
                    tmp.replace(target)
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        tmp.unlink()
            except OSError as exc:
                raise RemoteStorageError(f"copy of {segment_id}{suffix} failed: {exc}") from exc

    async def fetch_log_segment(
        self, segment_id: RemoteLogSegmentId, start_position: int, end_position: int | None = None
    ) -> bytes:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad range [{start_position}, {end_position})")
        return await asyncio.to_thread(
            self._read, segment_id, SEGMENT_SUFFIX, start_position, end_position
        )

    async def fetch_index(self, segment_id: RemoteLogSegmentId, index_type: IndexType) -> bytes:
        return await asyncio.to_thread(self._read, segment_id, index_type.value, 0, None)

    def _read(
        self, segment_id: RemoteLogSegmentId, suffix: str, start: int, end: int | None
    ) -> bytes:
        path = self.path_of(segment_id, suffix)
        try:
            with path.open("rb") as f:
                f.seek(start)
                return f.read() if end is None else f.read(end - start)
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(
                f"remote object {segment_id}{suffix} is missing ({path})"
            ) from None
        except OSError as exc:
            raise RemoteStorageError(f"read of {segment_id}{suffix} failed: {exc}") from exc

    async def delete_log_segment_data(self, segment_id: RemoteLogSegmentId) -> None:
        await asyncio.to_thread(self._delete, segment_id)

    def _delete(self, segment_id: RemoteLogSegmentId) -> None:
        # The .log first: once it is gone no reader takes the rest for a whole copy.
        for suffix in (SEGMENT_SUFFIX, *(t.value for t in IndexType)):
            try:
                self.path_of(segment_id, suffix).unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise RemoteStorageError(f"delete of {segment_id}{suffix} failed: {exc}") from exc
        # And what a copy killed half-way left under a temporary name.
        folder = self.path_of(segment_id, "").parent
        try:
            for tmp in folder.glob(f".{segment_id.id}.*.tmp"):
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise RemoteStorageError(
                f"delete of {segment_id}'s temporary files failed: {exc}"
            ) from exc

    async def put_if_absent(self, name: str, data: bytes) -> bool:
        return await asyncio.to_thread(self._put_if_absent, name, data)

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        target = self.root / name
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, target)  # atomic, and refused when the name exists
            except FileExistsError:
                return False
            return True
        except OSError as exc:
            raise RemoteStorageError(f"write of {name} failed: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    async def get_object(self, name: str) -> bytes | None:
        return await asyncio.to_thread(self._get_object, name)

    def _get_object(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RemoteStorageError(f"read of {name} failed: {exc}") from exc

    async def list_objects(self, under: str = "") -> list[str]:
        return await asyncio.to_thread(self._list, under)

    def _list(self, under: str) -> list[str]:
        base = self.root / under if under else self.root
        try:
            return sorted(
                p.relative_to(self.root).as_posix()
                for p in base.rglob("*")
                if p.is_file() and not p.name.startswith(".")
            )
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RemoteStorageError(f"list of {under or '/'} failed: {exc}") from exc

    async def delete_objects(self, names: list[str]) -> None:
        await asyncio.to_thread(self._delete_objects, names)

    def _delete_objects(self, names: list[str]) -> None:
        for name in names:
            try:
                (self.root / name).unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise RemoteStorageError(f"delete of {name} failed: {exc}") from exc

    async def delete_incomplete_objects(self, under: str) -> int:
        return await asyncio.to_thread(self._delete_incomplete, under)

    def _delete_incomplete(self, under: str) -> int:
        """The `.<name>.<random>.tmp` files directly below `under`: a write killed between
        creating its temporary file and linking or renaming it to its name left them."""
        removed = 0
        try:
            for tmp in (self.root / under).glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
                removed += 1
        except FileNotFoundError:
            return removed
        except OSError as exc:
            raise RemoteStorageError(
                f"removing the temporary files below {under or '/'} failed: {exc}"
            ) from exc
        return removed

    async def close(self) -> None:
        return None
