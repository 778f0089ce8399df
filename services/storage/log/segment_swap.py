"""Replacing segments by a cleaned one, crash-safely, and finishing a replacement that a crash
interrupted (Kafka's LocalLog.replaceSegments and the swap handling of its LogLoader).

The cleaner writes the new segment as `<base>.log.cleaned` (+ `.index.cleaned`,
`.timeindex.cleaned` and, when it has aborted transactions, `.txnindex.cleaned`), fsynced.
Installing it then goes:

1. rename the `.cleaned` files to `.swap` (indexes first, the `.log` last) and fsync the
   directory: from here on the new segment is complete and a restart finishes the swap;
2. delete the old segments' files (open fetch slices keep reading them through their
   descriptors, as after retention);
3. rename the `.swap` files to their final names (indexes first, the `.log` last), fsync.

At load, `complete_interrupted_swaps` removes every `.cleaned` and `.deleted` file (a swap
that never reached step 1: the old segments are intact) and every index `.swap` without its
`.log.swap`; for each `.log.swap` it deletes the segments whose base offset lies in the swap
segment's offset range (the old ones it replaces) and renames the swap files into place.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from .checkpoint import fsync_dir
from .config import LogConfig
from .file_records import FileRecords
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
# Renamed in this order, so a `.log.swap` on disk means its indexes were renamed before it.
SEGMENT_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)


def temp_path(dir: Path, base_offset: int, suffix: str, temp: str) -> Path:
    """`<base>.<suffix><temp>`, e.g. 00000000000000000000.log.cleaned."""
    path = segment_path(dir, base_offset, suffix)
    return path.with_name(path.name + temp)


def _rename_all(dir: Path, base_offset: int, old: str, new: str) -> None:
    for suffix in SEGMENT_SUFFIXES:
        src = temp_path(dir, base_offset, suffix, old)
        if src.exists():
            src.replace(temp_path(dir, base_offset, suffix, new))


def discard_cleaned(dir: Path, base_offset: int) -> None:
    """Remove the `.cleaned` files of a cleaning that will not be installed."""
    for suffix in SEGMENT_SUFFIXES:
        temp_path(dir, base_offset, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


def install_cleaned(
    dir: Path,
    old: Sequence[LogSegment],
    config: LogConfig,
    now_ms: int,
) -> LogSegment:
    """Steps 1-3 of the module docstring for the cleaned files of base `old[0].base_offset`;
    returns the new segment, opened. The caller puts it in place of `old` in the segment
    list in the same event-loop step, so no read sees the log half-swapped."""
    base = old[0].base_offset
    _rename_all(dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(dir)
    for segment in old:
        segment.delete()
    _rename_all(dir, base, SWAP_SUFFIX, "")
    fsync_dir(dir)
    return LogSegment.open(
        dir, base, config.segment_index_bytes, config.index_interval_bytes, now_ms
    )


def _swap_next_offset(path: Path, base_offset: int) -> int:
    """One past the last offset of the swap `.log` at `path` (base + 1 when it is empty, so
    the old segment at the same base is still recognised as replaced)."""
    records = FileRecords.open(path)
    try:
        next_offset = base_offset + 1
        for info in records.scan(0):
            next_offset = max(next_offset, info.last_offset + 1)
        return next_offset
    finally:
        records.close()


def _base_of(name: str) -> int | None:
    """The base offset a segment file (or its temporary copy) is named by, else None."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def complete_interrupted_swaps(dir: Path, what: object) -> None:
    """The loader's first step: clean up or finish what an interrupted cleaning left in
    `dir` (`what` names the log in messages)."""
    swaps: list[int] = []
    for path in sorted(dir.iterdir()):
        name = path.name
        if not path.is_file():
            continue
        base = _base_of(name)
        if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX)):
            logger.info("%s: removing leftover %s", what, name)
            path.unlink()
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and base is not None:
            swaps.append(base)
        elif name.endswith(SWAP_SUFFIX) and (
            base is None or not temp_path(dir, base, LOG_SUFFIX, SWAP_SUFFIX).exists()
        ):
            logger.info("%s: removing leftover %s", what, name)
            path.unlink()
    for base in swaps:
        end = _swap_next_offset(temp_path(dir, base, LOG_SUFFIX, SWAP_SUFFIX), base)
        for path in sorted(dir.iterdir()):
            other = _base_of(path.name)
            if (
                path.is_file()
                and other is not None
                and base <= other < end
                and path.name.endswith(SEGMENT_SUFFIXES)
            ):
                logger.info("%s: removing %s, replaced by a cleaned segment", what, path.name)
                path.unlink()
        logger.info("%s: completing the swap of cleaned segment %d", what, base)
        _rename_all(dir, base, SWAP_SUFFIX, "")
    if swaps:
        fsync_dir(dir)
