"""Small text checkpoint files, written atomically (Kafka's CheckpointFile and
OffsetCheckpointFile).

Format, as Kafka writes `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` in each log directory:

    0                      version
    2                      number of entries
    orders 0 1234          one entry per line: topic partition offset
    orders 1 987

A write goes to `<name>.tmp`, is fsynced, renamed over the file, and the directory is fsynced,
so a crash leaves either the old file or the new one, never a mix. A read of a missing file is
empty; a malformed file raises `CorruptCheckpointError` naming the file and the line.
`CheckpointFile` is generic over the entry so `leader-epoch-checkpoint` (`epoch start_offset`
lines) can reuse it.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

T = TypeVar("T")

CURRENT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_log_dir(dir: Path) -> None:
    """Remove a partition directory: renamed `<dir>.<id>-delete` at once (the partition is gone
    from then on), its files removed by a background thread, as Kafka deletes `-delete`
    directories asynchronously: unlinking a gigabyte of segments took the event loop ~0.3 s and
    stalled the node's acks=all traffic (bench/reassign_bench.py). A crash half-way leaves a
    name the log manager removes at startup."""
    doomed = dir.with_name(f"{dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
    os.replace(dir, doomed)
    threading.Thread(
        target=shutil.rmtree,
        args=(doomed,),
        kwargs={"ignore_errors": True},
        name=f"delete-{dir.name}",
        daemon=True,
    ).start()


class CorruptCheckpointError(RiverlogError):
    """A checkpoint file that cannot be parsed; the message names the file."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class CheckpointFile(Generic[T]):
    """A versioned list of entries, one per line, formatted and parsed by the given
    functions. Not thread-safe; one owner writes it."""

    def __init__(
        self,
        path: Path,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[str], T],
        version: int = CURRENT_VERSION,
    ) -> None:
        self.path = path
        self._format = format_entry
        self._parse = parse_entry
        self.version = version

    def render(self, entries: Iterable[T]) -> bytes:
        """The file's bytes for `entries` (what `write` writes)."""
        lines = [self._format(entry) for entry in entries]
        text = "".join(f"{line}\n" for line in [str(self.version), str(len(lines)), *lines])
        return text.encode("utf-8")

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file atomically with `entries`."""
        data = self.render(entries)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def read(self) -> list[T]:
        """The entries, or [] when the file does not exist."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._corrupt(f"unreadable: {exc}") from exc
        return self.parse(data)

    def parse(self, data: bytes) -> list[T]:
        """The entries in a file's bytes (read here, or the same format from elsewhere: a
        remote segment's leader-epoch checkpoint); raises CorruptCheckpointError."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"unreadable: {exc}") from exc
        lines = text.splitlines()
        if len(lines) < 2:
            raise self._corrupt("missing the version or count line")
        if lines[0].strip() != str(self.version):
            raise self._corrupt(f"unsupported version {lines[0].strip()!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise self._corrupt(f"malformed count line {lines[1]!r}") from None
        body = [line for line in lines[2:] if line.strip()]
        if count != len(body):
            raise self._corrupt(f"expected {count} entries, found {len(body)}")
        entries: list[T] = []
        for line in body:
            try:
                entries.append(self._parse(line))
            except ValueError as exc:
                raise self._corrupt(f"malformed line {line!r}: {exc}") from None
        return entries

    def _corrupt(self, why: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"checkpoint file {self.path}: {why}")


def _format_offset(entry: tuple[TopicPartition, int]) -> str:
    tp, offset = entry
    if not tp.topic or any(c.isspace() for c in tp.topic):
        raise ValueError(f"topic {tp.topic!r} cannot be written to a checkpoint")
    return f"{tp.topic} {tp.partition} {offset}"


def _parse_offset(line: str) -> tuple[TopicPartition, int]:
    fields = line.split()
    if len(fields) != 3:
        raise ValueError("expected 'topic partition offset'")
    topic, partition, offset = fields
    return TopicPartition(topic, int(partition)), int(offset)


class OffsetCheckpointFile:
    """A checkpoint of one offset per partition (recovery points, log start offsets, high
    watermarks) in Kafka's text format."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, _format_offset, _parse_offset
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        """The offsets, {} for a missing file; CorruptCheckpointError for a malformed one
        (including a partition listed twice)."""
        offsets: dict[TopicPartition, int] = {}
        for tp, offset in self._file.read():
            if tp in offsets:
                raise self._file._corrupt(f"{tp} listed twice")
            offsets[tp] = offset
        return offsets
