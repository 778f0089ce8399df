"""Which leader epoch wrote which offsets of a partition log: Kafka's LeaderEpochFileCache and its
`leader-epoch-checkpoint` file (KIP-101).

Each entry is (epoch, start offset): the first offset written under that leader epoch. The
entries grow in both fields. A leader adds one when it takes leadership (its log end offset then
is where its epoch starts); a follower adds one whenever a fetched batch carries a newer
`partitionLeaderEpoch`. The question the cache answers — "where did epoch E end in this log?" —
is what OffsetsForLeaderEpoch returns, and what lets a follower truncate exactly the part of its
log that diverged from the leader's instead of cutting at its high watermark (which loses
acknowledged records, or keeps divergent ones: the two KIP-101 cases).

File format, in the partition directory, written atomically by `CheckpointFile` at every change:

    0                version
    2                number of entries
    0 0              epoch start_offset
    3 1200
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path
from typing import Final, NamedTuple

from .checkpoint import CheckpointFile

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _format(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _parse(line: str) -> EpochEntry:
    fields = line.split()
    if len(fields) != 2:
        raise ValueError("expected 'epoch start_offset'")
    return EpochEntry(int(fields[0]), int(fields[1]))


def epoch_checkpoint(path: Path) -> CheckpointFile[EpochEntry]:
    """The `leader-epoch-checkpoint` format at `path`: `read()` a file as written (not
    sanitized), `render` / `parse` the same bytes kept elsewhere (a remote segment's copy,
    named `<segment id>.leader-epoch-checkpoint`)."""
    return CheckpointFile(path, _format, _parse)


class LeaderEpochFileCache:
    """The epoch entries of one partition log, mirrored to its checkpoint file.

    Lifecycle: built when the log opens (reads the file; an unreadable file starts empty, which
    is safe: the follower then asks from an older epoch and truncates more); changed by
    `assign`, `truncate_from_end`, `truncate_from_start`; owned by its PartitionLog. Event-loop
    thread only.
    """

    def __init__(self, path: Path | None) -> None:
        """`path` None keeps the cache in memory only (tests)."""
        self._file: CheckpointFile[EpochEntry] | None = (
            epoch_checkpoint(path) if path is not None else None
        )
        self._entries: list[EpochEntry] = []
        if self._file is not None:
            try:
                self._entries = self._sanitized(self._file.read())
            except Exception as exc:  # CorruptCheckpointError or an unreadable file
                log.error("%s; starting with an empty leader epoch cache", exc)
                self._entries = []

    @classmethod
    def in_dir(cls, directory: Path) -> LeaderEpochFileCache:
        return cls(directory / LEADER_EPOCH_CHECKPOINT)

    @staticmethod
    def _sanitized(entries: list[EpochEntry]) -> list[EpochEntry]:
        """Keep the entries that grow in epoch and start offset (a hand-edited or torn file
        cannot make the cache answer nonsense)."""
        out: list[EpochEntry] = []
        for entry in entries:
            if entry.epoch < 0 or entry.start_offset < 0:
                continue
            if out and (entry.epoch <= out[-1].epoch or entry.start_offset < out[-1].start_offset):
                continue
            out.append(entry)
        return out

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def start_offset_of(self, epoch: int) -> int | None:
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
        return None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.
        Entries that conflict (an epoch at or above `epoch`, or starting at or after
        `start_offset`) are removed first, as Kafka does; the same epoch again at a later
        offset is not a change."""
        if epoch < 0 or start_offset < 0:
            return False
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        if latest is not None and epoch < latest.epoch:
            log.warning(
                "not assigning epoch %d at %d: the latest is %s", epoch, start_offset, latest
            )
            return False
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the largest epoch <= `requested`
        in the cache and the start offset of the first epoch after it (the log end offset when
        `requested` is the latest). (UNDEFINED, UNDEFINED) when `requested` is newer than any
        epoch here or undefined; (requested, first start offset) when it is older than all."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: drop the epochs starting at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved up to `start_offset`: drop epochs wholly below it and move the
        start of the one holding it there."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return
        holding = bisect.bisect_right([e.start_offset for e in self._entries], start_offset) - 1
        first = self._entries[holding]
        self._entries = [EpochEntry(first.epoch, start_offset), *self._entries[holding + 1 :]]
        self._flush()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._flush()

    def _flush(self) -> None:
        if self._file is not None and self._file.path.parent.exists():
            self._file.write(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._entries})"
