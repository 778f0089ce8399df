"""The log cleaner of a storage node (Kafka's LogCleaner with one cleaner thread): compacts
the logs of `cleanup.policy=compact` topics in the background.

One asyncio task loops: pick the dirtiest due log (`CleanerManager`), take a snapshot of its
cleanable segments and pin their `.log` descriptors (event loop), run the pass that reads them
and writes `.cleaned` files in a worker thread (`Cleaner`), then install the result on the
event loop in one step (`PartitionLog.replace_segments`), where appends, fetches, retention
and truncation also run, so none of them ever sees a half-swapped log. A log that changed
under the pass (retention deleted a segment, truncation cut one, the log was deleted) keeps
its segments and is cleaned again later. When no log is due the task sleeps
`log.cleaner.backoff.ms`. Each cleaned log gets one INFO summary line (sizes, records, time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass

from riverlog.common.clock import Clock

from ..log_manager import LogManager
from .cleaner import Cleaner, CleanerStats, CleaningAborted, LogToClean
from .cleaner_manager import Candidate, CleanerManager
from .offset_map import OffsetMap

logger = logging.getLogger(__name__)

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker keys of the cleaner (Kafka's names and defaults)."""

    enable: bool = True
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 134_217_728


class LogCleaner:
    """Lifecycle: construct → `start()` on the event loop → `await stop()` (before the log
    manager closes). `clean_once()` runs one pass directly (tests, benchmarks)."""

    def __init__(
        self,
        log_manager: LogManager,
        clock: Clock,
        config: CleanerConfig,
    ) -> None:
        self._logs = log_manager
        self._clock = clock
        self._config = config
        self.manager = CleanerManager(log_manager.log_dirs)
        self._abort = threading.Event()
        self._cleaner = Cleaner(OffsetMap(config.dedupe_buffer_size), self._abort)
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.passes = 0

    @property
    def running(self) -> bool:
        """Whether the cleaning task was started (and not stopped)."""
        return self._task is not None

    def start(self) -> None:
        if self._config.enable and self._task is None:
            self._task = asyncio.create_task(self._loop(), name="log-cleaner")

    async def stop(self) -> None:
        """Stop the loop; a pass in progress is abandoned at its next batch."""
        self._stopping.set()
        self._abort.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                cleaned = await self.clean_once()
            except Exception:
                logger.exception("log cleaner pass failed; backing off")
                cleaned = False
            if not cleaned:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self._config.backoff_ms / 1000.0)

    async def clean_once(self) -> bool:
        """Clean the dirtiest due log, if any; True when a log was cleaned."""
        now = self._clock.time_ms()
        candidate = self.manager.grab_filthiest(self._logs.all_logs(), now)
        if candidate is None:
            return False
        task = self.manager.to_clean(candidate, now)
        pinned = [s.segment.log for s in task.segments]
        for records in pinned:
            records.retain()
        try:
            stats = await self._run(task)
        except CleaningAborted:
            return False
        except Exception:
            # Kafka's markPartitionUncleanable: one bad log must not stop the others.
            logger.exception("%s: cleaning failed; not cleaning it again until restart", task.tp)
            self.manager.uncleanable.add(candidate.log.tp)
            return False
        finally:
            for records in pinned:
                records.release()
        self._install(candidate, stats)
        return True

    async def _run(self, task: LogToClean) -> CleanerStats:
        """The pass in a worker thread. If this task is cancelled meanwhile, the thread is
        told to stop and waited for, so the pinned descriptors outlive every read."""
        future = asyncio.get_running_loop().run_in_executor(None, self._cleaner.clean, task)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self._abort.set()
            with contextlib.suppress(Exception):
                await asyncio.wait([future])
            raise

    def _install(self, candidate: Candidate, stats: CleanerStats) -> None:
        log = candidate.log
        installed = True
        for group in stats.groups:
            old = [s.segment for s in group.old]
            if not log.replace_segments(old, [s.size for s in group.old]):
                installed = False
        if not installed:
            logger.info("%s: the log changed during cleaning; cleaning it again later", log.tp)
            self.manager.first_dirty.pop(log.tp, None)
            return
        self.passes += 1
        live = [(lg.tp, d) for lg in self._logs.all_logs() if (d := self._logs.log_dir_of(lg.tp))]
        self.manager.done_cleaning(
            log.tp,
            self._logs.log_dir_of(log.tp),
            stats.end_offset,
            stats.next_delete_horizon_ms,
            live,
        )
        _log_summary(candidate, stats)


def _log_summary(candidate: Candidate, stats: CleanerStats) -> None:
    elapsed = max(stats.elapsed_s, 1e-6)
    before, after = stats.bytes_read, stats.bytes_written
    logger.info(
        "cleaned log %s (dirty section [%d, %d), ratio %.2f): %s -> %s "
        "(%.0f%% size reduction), %d -> %d records, %d segments -> %d, "
        "%d keys in the offset map (%.0f%% full), %.2f s (%.1f MB/s)",
        candidate.log.tp,
        candidate.first_dirty,
        stats.end_offset,
        candidate.dirty_ratio,
        _size(before),
        _size(after),
        100.0 * (before - after) / before if before else 0.0,
        stats.records_read,
        stats.records_kept,
        sum(len(g.old) for g in stats.groups),
        len(stats.groups),
        stats.map_records,
        100.0 * stats.map_utilization,
        elapsed,
        before / MB / elapsed,
    )


def _size(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB else f"{n / 1024:.1f} KB"
