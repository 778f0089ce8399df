"""The leader's side of tiered storage (Kafka's RemoteLogManager and its RLMCopyTask /
RLMExpirationTask): one asyncio task per partition this node leads with
`remote.storage.enable`, every `remote.log.manager.task.interval.ms`:

1. on a new leader epoch, write EPOCH_START to the metadata log (fencing the previous leader);
2. clean up what an interrupted leader left: segments in COPY_SEGMENT_STARTED (an orphan copy:
   its objects are deleted, and the segment is copied again under a new id) or
   DELETE_SEGMENT_STARTED (the delete is finished);
3. copy each closed segment below min(high watermark, last stable offset) not copied yet, in
   order: COPY_SEGMENT_STARTED, the objects, COPY_SEGMENT_FINISHED; then tell the log
   (`copied_next_offset`), so local retention may remove it;
4. expire remote segments by the total retention (DELETE_SEGMENT_STARTED, the objects,
   DELETE_SEGMENT_FINISHED) and move the log start offset past them; DeleteRecords wakes the
   task, so the remote segments wholly below the new log start go at once;
5. compact the metadata log once `remote.log.metadata.snapshot.interval.records` records were
   written since its last snapshot (`metadata_compaction.py`).

A store that fails makes the task back off (`remote.log.manager.task.retry.backoff.ms`,
doubling up to `.max.ms`) and try again; meanwhile local data stays (nothing uncopied is taken
for copied), produce and fetch go on. FENCED_LEADER_EPOCH (a newer leader wrote) ends the task.
The tasks run on the event loop that owns the logs and touch a log only between awaits, so
they never race an append; file and network I/O happens in the store, off the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..log.leader_epoch_cache import EpochEntry, epoch_checkpoint
from ..log.partition_log import PartitionLog
from ..log.segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)
from ..log.tiered_retention import remote_expired_segments, segments_to_copy
from ..producer.snapshot import snapshot_path
from ..remote_log_config import RemoteLogConfig
from .metadata_manager import RemoteLogMetadataManager
from .segment_metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState
from .storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteStorageError,
    RemoteStorageManager,
)

log = logging.getLogger(__name__)

S = RemoteLogSegmentState


def epoch_checkpoint_slice(entries: list[tuple[int, int]], start: int, end: int) -> dict[int, int]:
    """The leader epochs covering offsets [start, end) as {epoch: first offset in the range}:
    the epoch in force at `start`, then every epoch that begins inside the range."""
    out: dict[int, int] = {}
    for epoch, first in entries:
        if first <= start:
            out = {epoch: start}
        elif first < end:
            out[epoch] = first
    return out


def checkpoint_bytes(epochs: dict[int, int]) -> bytes:
    """Epochs in the `leader-epoch-checkpoint` format (leader_epoch_cache.py)."""
    checkpoint = epoch_checkpoint(Path(IndexType.LEADER_EPOCH.value))
    return checkpoint.render(EpochEntry(e, o) for e, o in sorted(epochs.items()))


def segment_data(segment: LogSegment, next_offset: int, epochs: bytes) -> LogSegmentData:
    """The files of a closed segment to copy; `next_offset` is the offset after it (the
    producer snapshot taken when it rolled is named by that offset); `epochs` the
    leader-epoch checkpoint slice covering it."""
    d, base = segment.dir, segment.base_offset
    txn = segment_path(d, base, TXN_INDEX_SUFFIX)
    snapshot = snapshot_path(d, next_offset)
    return LogSegmentData(
        log_segment=segment.log.path,
        offset_index=segment_path(d, base, INDEX_SUFFIX),
        time_index=segment_path(d, base, TIME_INDEX_SUFFIX),
        transaction_index=txn if txn.exists() and txn.stat().st_size > 0 else None,
        producer_snapshot=snapshot if snapshot.exists() else None,
        leader_epoch_index=epochs,
    )


async def _sleep_or_wake(wake: asyncio.Event, timeout_s: float) -> None:
    """Until `timeout_s` passes or `wake` is set (then cleared for the next round)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await wake.wait()
    wake.clear()


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class PartitionTask:
    """The state of one partition's task: the epoch it leads in, and its backoff."""

    log: PartitionLog
    leader_epoch: int
    epoch_started: bool = False
    backoff_ms: int = 0
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    # Set to run the next round at once (DeleteRecords moved the log start below the local
    # start: the remote segments below it go now, not at the next task interval).
    wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def on_log_start_moved(self, _offset: int) -> None:
        self.wake.set()


class RemoteLogManager:
    """Runs the copy-and-expire task of every partition this node leads with tiering on.
    Lifecycle: construct → `on_leader(log, epoch)` / `on_not_leader(tp)` as leadership moves →
    `await stop()`. Event-loop thread only. `run_once` runs one round by hand (tests)."""

    def __init__(
        self,
        config: RemoteLogConfig,
        store: RemoteStorageManager,
        clock: Clock,
        metadata: RemoteLogMetadataManager | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.metadata = metadata or RemoteLogMetadataManager(
            store, relist_interval_s=10 * config.task_interval_ms / 1000.0
        )
        self._clock = clock
        self._tasks: dict[TopicPartition, PartitionTask] = {}
        self._deletions: set[asyncio.Task[None]] = set()
        self._following: dict[TopicPartition, tuple[PartitionLog, asyncio.Task[None]]] = {}
        self.bytes_copied = 0
        self.segments_copied = 0
        self.copy_failures = 0

    # -- leadership -------------------------------------------------------------------------

    def on_leader(self, partition_log: PartitionLog, leader_epoch: int) -> None:
        """This node leads `partition_log` in `leader_epoch`: start (or restart) its task when
        the topic has remote.storage.enable."""
        tp = partition_log.tp
        current = self._tasks.get(tp)
        if current is not None and current.leader_epoch == leader_epoch:
            return
        self.on_not_leader(tp)
        if not partition_log.remote_storage_enabled:
            return
        state = PartitionTask(partition_log, leader_epoch)
        state.task = asyncio.create_task(self._loop(state), name=f"rlm-{tp}")
        partition_log.on_log_start_moved.append(state.on_log_start_moved)
        self._tasks[tp] = state

    def on_not_leader(self, tp: TopicPartition) -> None:
        state = self._tasks.pop(tp, None)
        if state is None:
            return
        hooks = state.log.on_log_start_moved
        if state.on_log_start_moved in hooks:
            hooks.remove(state.on_log_start_moved)
        if state.task is not None:
            state.task.cancel()

    def sync_leaders(
        self,
        leaders: dict[TopicPartition, tuple[PartitionLog, int]],
        gone: set[TopicPartition],
        followers: dict[TopicPartition, PartitionLog] | None = None,
    ) -> None:
        """Follow the node's leaderships after a metadata change: `leaders` maps each partition
        this node leads to (log, leader epoch); a partition in `gone` had its topic deleted
        while this node led it, so its remote data is deleted too; for each tiered log in
        `followers` a light task reads the metadata the leader writes, so local retention on
        the follower knows what is copied."""
        for tp in list(self._tasks):
            if tp not in leaders:
                self.on_not_leader(tp)
        for partition_log, epoch in leaders.values():
            self.on_leader(partition_log, epoch)
        wanted = {tp: plog for tp, plog in (followers or {}).items() if plog.remote_storage_enabled}
        for tp in list(self._following):
            if tp not in wanted or self._following[tp][0] is not wanted[tp]:
                self._following.pop(tp)[1].cancel()
        for tp, plog in wanted.items():
            if tp not in self._following:
                task = asyncio.create_task(self._follow(plog), name=f"rlm-follow-{tp}")
                self._following[tp] = (plog, task)
        for tp in gone:
            task = asyncio.create_task(self.delete_remote(tp), name=f"rlm-delete-{tp}")
            self._deletions.add(task)
            task.add_done_callback(self._deletions.discard)

    async def _follow(self, plog: PartitionLog) -> None:
        """A follower's task: refresh the partition's remote metadata every task interval and
        publish what is copied to the log (backing off while the store fails)."""
        delay = self.config.task_interval_ms
        while True:
            try:
                state = await self.metadata.refresh(plog.tp)
                copied = state.copied_next_offset()
                if copied is not None:
                    plog.copied_next_offset = max(copied, plog.log_start_offset)
                plog.remote_size_bytes = state.size_bytes()
                delay = self.config.task_interval_ms
            except RemoteStorageError as exc:
                delay = min(
                    max(delay * 2, self.config.retry_backoff_ms), self.config.retry_backoff_max_ms
                )
                log.warning("%s: reading remote metadata failed (%s)", plog.tp, exc.message)
            except Exception:
                log.exception("%s: reading remote metadata failed", plog.tp)
            await asyncio.sleep(delay / 1000.0)

    async def delete_remote(self, tp: TopicPartition) -> None:
        """Delete every remote object of `tp` (topic deletion), retrying while the store fails."""
        backoff = self.config.retry_backoff_ms
        while True:
            try:
                count = await self.metadata.delete_partition(tp)
                log.info("%s: deleted %d remote objects of the deleted topic", tp, count)
                return
            except RemoteStorageError as exc:
                log.warning("%s: remote delete failed (%s); retrying", tp, exc.message)
                await asyncio.sleep(backoff / 1000.0)
                backoff = min(backoff * 2, self.config.retry_backoff_max_ms)

    def led(self) -> list[TopicPartition]:
        return list(self._tasks)

    def leads(self, tp: TopicPartition) -> bool:
        return tp in self._tasks

    async def stop(self) -> None:
        tasks = [s.task for s in self._tasks.values() if s.task is not None]
        for state in self._tasks.values():
            hooks = state.log.on_log_start_moved
            if state.on_log_start_moved in hooks:
                hooks.remove(state.on_log_start_moved)
        tasks += [task for _, task in self._following.values()]
        self._tasks.clear()
        self._following.clear()
        await _cancel_all(tasks)
        # Then the deletions, with the discards that copies cancelled just now added.
        await _cancel_all(list(self._deletions))
        await self.store.close()

    async def _loop(self, state: PartitionTask) -> None:
        cfg = self.config
        while True:
            try:
                await self.run_once(state)
                state.backoff_ms = 0
                delay = cfg.task_interval_ms
            except RemoteStorageError as exc:
                self.copy_failures += 1
                state.backoff_ms = min(
                    max(state.backoff_ms * 2, cfg.retry_backoff_ms), cfg.retry_backoff_max_ms
                )
                delay = state.backoff_ms
                log.warning(
                    "%s: remote store failed (%s); local data is kept; retrying in %d ms",
                    state.log.tp,
                    exc.message,
                    delay,
                )
            except RiverlogError as exc:
                if exc.code == ErrorCode.FENCED_LEADER_EPOCH:
                    log.info("%s: %s; stopping the remote log task", state.log.tp, exc.message)
                    self._tasks.pop(state.log.tp, None)
                    return
                log.exception("%s: remote log task failed", state.log.tp)
                delay = cfg.task_interval_ms
            except Exception:
                log.exception("%s: remote log task failed", state.log.tp)
                delay = cfg.task_interval_ms
            await _sleep_or_wake(state.wake, delay / 1000.0)

    # -- one round --------------------------------------------------------------------------

    async def run_once(self, state: PartitionTask) -> None:
        """Steps 1-5 of the module docstring, once."""
        tp, epoch = state.log.tp, state.leader_epoch
        if not state.epoch_started:
            await self.metadata.start_epoch(tp, epoch)
            state.epoch_started = True
        await self._clean_up(state)
        await self._copy(state)
        await self._expire(state)
        await self.metadata.compact(tp, epoch, self.config.metadata_snapshot_interval_records)

    def _publish(self, state: PartitionTask) -> None:
        """Tell the log what is copied (local retention's input)."""
        meta = self.metadata.state(state.log.tp)
        if meta is None:
            return
        copied = meta.copied_next_offset()
        state.log.copied_next_offset = max(
            copied if copied is not None else 0, state.log.log_start_offset
        )
        state.log.remote_size_bytes = meta.size_bytes()

    async def _clean_up(self, state: PartitionTask) -> None:
        meta = self.metadata.state(state.log.tp)
        if meta is None:
            return
        for segment in meta.in_state(S.COPY_SEGMENT_STARTED):
            log.info("%s: removing the interrupted copy %s", state.log.tp, segment.segment_id)
            await self._delete(segment, state.leader_epoch)
        for segment in meta.in_state(S.DELETE_SEGMENT_STARTED):
            await self._delete(segment, state.leader_epoch)
        self._publish(state)

    async def _delete(self, segment: RemoteLogSegmentMetadata, epoch: int) -> None:
        """DELETE_SEGMENT_STARTED (unless an earlier leader got that far), the objects,
        DELETE_SEGMENT_FINISHED."""
        now = self._clock.time_ms()
        if segment.state is not S.DELETE_SEGMENT_STARTED:
            segment = segment.transition_to(S.DELETE_SEGMENT_STARTED, epoch, now)
            await self.metadata.update(segment)
        await self.store.delete_log_segment_data(segment.segment_id)
        await self.metadata.update(segment.transition_to(S.DELETE_SEGMENT_FINISHED, epoch, now))

    async def _copy(self, state: PartitionTask) -> None:
        plog = state.log
        while True:
            copied = plog.copied_next_offset if plog.copied_next_offset is not None else 0
            bound = plog.high_watermark
            unstable = plog.first_unstable_offset()
            if unstable is not None:
                bound = min(bound, unstable)
            todo = segments_to_copy(plog.segments, copied, bound)
            if not todo:
                return
            segment = todo[0]
            segments = plog.segments
            next_offset = segments[segments.index(segment) + 1].base_offset
            await self._copy_segment(state, segment, next_offset)

    async def _copy_segment(
        self, state: PartitionTask, segment: LogSegment, next_offset: int
    ) -> None:
        plog, epoch = state.log, state.leader_epoch
        tp = plog.tp
        start = max(segment.base_offset, plog.log_start_offset)
        entries = [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries]
        epochs = epoch_checkpoint_slice(entries, start, next_offset) or {epoch: start}
        data = segment_data(segment, next_offset, checkpoint_bytes(epochs))
        now = self._clock.time_ms()
        metadata = RemoteLogSegmentMetadata.copy_started(
            RemoteLogSegmentId.generate(tp),
            start,
            next_offset - 1,
            segment.largest_timestamp,
            epochs,
            segment.size,
            epoch,
            now,
        )
        await self.metadata.add(metadata)
        upload = asyncio.ensure_future(self.store.copy_log_segment_data(metadata.segment_id, data))
        try:
            await asyncio.shield(upload)
        except asyncio.CancelledError:
            # Leadership moved while the objects were being written (on_not_leader cancels
            # this task): the store call goes on (a worker thread, a request in flight) and
            # may land after the new leader removed this attempt. Remove them once it ends.
            self._discard_after(upload, metadata.segment_id)
            raise
        finished = metadata.transition_to(S.COPY_SEGMENT_FINISHED, epoch, self._clock.time_ms())
        try:
            await self.metadata.update(finished)
        except RiverlogError as exc:
            if exc.code == ErrorCode.FENCED_LEADER_EPOCH:
                # A newer leader wrote first (this node has not heard of it yet): the attempt
                # is never finished, and the new leader's cleanup of it may have run before
                # these objects landed.
                self._discard_after(upload, metadata.segment_id)
            raise
        self.bytes_copied += segment.size
        self.segments_copied += 1
        log.info("%s: copied [%d, %d] as %s", tp, start, next_offset - 1, metadata.segment_id)
        self._publish(state)

    def _discard_after(self, upload: asyncio.Future[None], segment_id: RemoteLogSegmentId) -> None:
        """Once `upload` ended (however), delete the objects of that copy attempt, which no
        one will finish: its id is its own, so nothing readable goes with it. Retried with
        the backoff while the store fails; `stop` cancels it (the next leader's cleanup of
        COPY_SEGMENT_STARTED, or a later one, covers what is left)."""

        async def discard() -> None:
            await asyncio.wait([upload])
            if not upload.cancelled() and upload.exception() is not None:
                log.info("%s: abandoned copy failed: %s", segment_id, upload.exception())
            backoff = self.config.retry_backoff_ms
            while True:
                try:
                    await self.store.delete_log_segment_data(segment_id)
                    log.info("%s: removed the objects of an abandoned copy", segment_id)
                    return
                except RemoteStorageError as exc:
                    log.warning("%s: removing an abandoned copy failed (%s)", segment_id, exc)
                    await asyncio.sleep(backoff / 1000.0)
                    backoff = min(backoff * 2, self.config.retry_backoff_max_ms)

        task = asyncio.create_task(discard(), name=f"rlm-discard-{segment_id}")
        self._deletions.add(task)
        task.add_done_callback(self._deletions.discard)

    async def _expire(self, state: PartitionTask) -> None:
        plog = state.log
        meta = self.metadata.state(plog.tp)
        if meta is None:
            return
        remote = meta.readable_segments()
        count = remote_expired_segments(
            remote, plog.segments, plog.config, self._clock.time_ms(), plog.log_start_offset
        )
        for segment in remote[:count]:
            await self._delete(segment, state.leader_epoch)
            plog.advance_log_start_from_remote(segment.end_offset + 1)
        self._publish(state)
