"""Committed offsets of a group member: commit_sync, commit_async, the auto commit timer and
the OffsetFetch that gives newly assigned partitions their starting position.

Threads: every method is called from the consumer's thread. commit_async hands the call to one
worker thread (commits stay in order) and its outcome comes back through a queue;
`invoke_completed()`, called by poll() and by every commit, runs the callbacks and applies the
errors' effects (rejoin, reset generation) on the consumer's thread, as Kafka's
`invokeCompletedOffsetCommitCallbacks`. Synchronous commits and committed-offset look-ups retry
retriable errors (coordinator moving or loading) until their deadline, pausing retry.backoff.ms
doubling up to retry.backoff.max.ms (`OffsetCommitter._back_off`); asynchronous commits are tried
once, as in Kafka.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition

from ...errors import ClientTimeoutError, CommitFailedError, RebalanceInProgressError
from .api import CommitRequest, CommittedOffset, GroupApi, GroupMember, OffsetAndMetadata

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, OffsetAndMetadata]
CommitCallback = Callable[[Offsets, Exception | None], None]

# Errors after which the member is not in the generation it committed for.
GENERATION_ERRORS = frozenset(
    {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID}
)


def commit_error(code: ErrorCode, message: str = "") -> RiverlogError:
    """The exception a commit failing with `code` raises (Kafka's mapping)."""
    if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
        return CommitFailedError(
            message
            or "the commit failed: this member is no longer in the group generation it read "
            "for (its partitions went to others: poll() more often, or lower "
            "max.poll.records / raise max.poll.interval.ms)"
        )
    if code == ErrorCode.REBALANCE_IN_PROGRESS:
        return RebalanceInProgressError(
            message or "the group is rebalancing: commit again after the next poll()"
        )
    return error_for(code, message)


def committed_error(failed: Mapping[TopicPartition, ErrorCode]) -> RiverlogError:
    """What a committed-offset look-up whose partitions failed with errors that cannot be
    retried raises, as Kafka's OffsetFetchResponseHandler: TOPIC_AUTHORIZATION_FAILED of any
    partition is one error naming every refused topic (Kafka's TopicAuthorizationException),
    else the first partition's error."""
    refused = sorted(
        {tp.topic for tp, code in failed.items() if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    )
    if refused:
        return RiverlogError(
            f"not authorized to read the committed offsets of topics: {', '.join(refused)}",
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        )
    tp, code = next(iter(failed.items()))
    return RiverlogError(f"committed offset of {tp}: {error_for(code).message}", code)


class OffsetCommitter:
    """Commits and fetches one group's offsets. `member()` names the identity to commit with
    (it raises when the member may not commit now); `on_error(code)` is told of every commit
    error so the group state follows (both are called on the consumer's thread)."""

    def __init__(
        self,
        api: GroupApi,
        group_id: str,
        *,
        clock: Clock,
        auto_commit: bool,
        auto_commit_interval_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        member: Callable[[], GroupMember],
        on_error: Callable[[ErrorCode], None],
        require_stable: bool = False,
        retry_backoff_max_ms: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api = api
        # read_committed (KIP-447): never start from an offset a pending transaction replaces.
        self._require_stable = require_stable
        self._group_id = group_id
        self._clock = clock
        self.auto_commit = auto_commit
        self._interval_ms = auto_commit_interval_ms
        self._request_timeout_s = request_timeout_ms / 1000
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = max(retry_backoff_max_ms or retry_backoff_ms, retry_backoff_ms)
        self._sleep = sleep  # the pauses of `_back_off` (tests pass one that moves `clock`)
        self._member = member
        self._on_error = on_error
        self._next_auto_commit = clock.monotonic_ms() + auto_commit_interval_ms
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._completed: queue.SimpleQueue[tuple[CommitCallback | None, Offsets, ErrorCode]] = (
            queue.SimpleQueue()
        )

    # ---- synchronous ---------------------------------------------------------------------

    def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float
    ) -> None:
        """Commit `offsets`, retrying retriable failures until `timeout_s` with the pauses of
        Kafka's commitOffsetsSync (`retryBackoff.backoff(attempts++)`, `_back_off`); raises
        CommitFailedError, RebalanceInProgressError or the error that cannot be retried, and
        ClientTimeoutError rather than take a pause that would end past `timeout_s`."""
        self.invoke_completed()
        if not offsets:
            return
        deadline_ms = self._clock.monotonic_ms() + round(timeout_s * 1000)
        pending = dict(offsets)
        attempt = 0
        while True:
            request = CommitRequest(self._member(), pending)
            try:
                results = self._api.offset_commit(request, self._request_timeout_s)
            except RiverlogError as e:
                if not e.retriable:
                    raise
                results = dict.fromkeys(pending, e.code)
            failed = {tp: code for tp, code in results.items() if code != ErrorCode.NONE}
            pending = {tp: pending[tp] for tp in failed if tp in pending}
            if not pending:
                return
            fatal = [code for code in failed.values() if not error_for(code).retriable]
            if fatal:
                self._on_error(fatal[0])
                raise commit_error(fatal[0])
            names = ", ".join(str(tp) for tp in sorted(pending))
            self._back_off(
                attempt,
                deadline_ms,
                f"committing {names} did not succeed within {round(timeout_s * 1000)} ms "
                f"(last error: {next(iter(failed.values())).name})",
            )
            attempt += 1

    # ---- asynchronous --------------------------------------------------------------------

    def commit_async(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], callback: CommitCallback | None
    ) -> None:
        """Send the commit from the worker thread; `callback(offsets, error)` runs later on
        the consumer's thread (at the next poll() or commit)."""
        self.invoke_completed()
        offsets = dict(offsets)
        if not offsets:
            if callback is not None:
                self._completed.put((callback, offsets, ErrorCode.NONE))
            return
        try:
            request = CommitRequest(self._member(), offsets)
        except RiverlogError as e:
            self._completed.put((callback, offsets, e.code))
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="riverlog-commit")
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._executor.submit(self._send, request, callback))

    def _send(self, request: CommitRequest, callback: CommitCallback | None) -> None:
        """Worker thread: one attempt; the first error of any partition is the outcome."""
        offsets = dict(request.offsets)
        try:
            results = self._api.offset_commit(request, self._request_timeout_s)
        except RiverlogError as e:
            self._completed.put((callback, offsets, e.code))
            return
        except Exception:
            log.exception("offset commit of group %s failed", self._group_id)
            self._completed.put((callback, offsets, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        codes = [code for code in results.values() if code != ErrorCode.NONE]
        self._completed.put((callback, offsets, codes[0] if codes else ErrorCode.NONE))

    def invoke_completed(self) -> None:
        """Consumer thread: run the callbacks of finished async commits and apply errors."""
        while True:
            try:
                callback, offsets, code = self._completed.get_nowait()
            except queue.Empty:
                return
            error: Exception | None = None
            if code != ErrorCode.NONE:
                if code in GENERATION_ERRORS or code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self._on_error(code)
                error = commit_error(code)
            if callback is not None:
                callback(offsets, error)
            elif error is not None:
                log.warning("async commit of group %s failed: %s", self._group_id, error)

    def wait_pending(self, timeout_s: float) -> None:
        """Wait for async commits sent so far (before a rebalance or close) and run their
        callbacks."""
        deadline = time.monotonic() + timeout_s
        for future in self._pending:
            try:
                future.result(timeout=max(deadline - time.monotonic(), 0.0))
            except Exception:
                break
        self._pending = [f for f in self._pending if not f.done()]
        self.invoke_completed()

    # ---- auto commit ---------------------------------------------------------------------

    def maybe_auto_commit(self, consumed: Callable[[], Offsets]) -> None:
        """From poll(): commit the positions asynchronously when auto.commit.interval.ms has
        passed since the last auto commit."""
        if not self.auto_commit:
            return
        now = self._clock.monotonic_ms()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._interval_ms
        self.commit_async(consumed(), None)

    def reset_auto_commit_timer(self) -> None:
        """After a rebalance: the next auto commit is one interval away."""
        self._next_auto_commit = self._clock.monotonic_ms() + self._interval_ms

    # ---- committed offsets ---------------------------------------------------------------

    def fetch_committed(
        self, partitions: Sequence[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, CommittedOffset]:
        """The committed offsets of `partitions` (offset -1: none), retrying retriable errors
        (coordinator loading or moving; UNSTABLE_OFFSET_COMMIT while a transaction with offsets
        of the partition is open, under read_committed) until `timeout_s`. The pause between
        attempts is retry.backoff.ms doubling up to retry.backoff.max.ms, as Kafka's
        fetchCommittedOffsets (`retryBackoff.backoff(attempts++)`) and the consumer's offset
        resets; a pause that would end past `timeout_s` is not taken (ClientTimeoutError)."""
        deadline_ms = self._clock.monotonic_ms() + round(timeout_s * 1000)
        pending = list(partitions)
        found: dict[TopicPartition, CommittedOffset] = {}
        attempt = 0
        while pending:
            try:
                results = self._api.offset_fetch(
                    self._group_id, pending, self._request_timeout_s, self._require_stable
                )
            except RiverlogError as e:
                if not e.retriable:
                    raise
                results = {tp: CommittedOffset(-1, error_code=e.code) for tp in pending}
            retry: list[TopicPartition] = []
            failed: dict[TopicPartition, ErrorCode] = {}
            for tp in pending:
                result = results.get(tp, CommittedOffset(-1))
                if result.error_code == ErrorCode.NONE:
                    found[tp] = result
                elif error_for(result.error_code).retriable:
                    retry.append(tp)
                else:
                    failed[tp] = result.error_code
            if failed:
                raise committed_error(failed)
            pending = retry
            if pending:
                names = ", ".join(str(tp) for tp in sorted(pending))
                self._back_off(
                    attempt, deadline_ms, f"committed offsets of {names} not found in time"
                )
                attempt += 1
        return found

    def _back_off(self, attempt: int, deadline_ms: int, timed_out: str) -> None:
        """The pause after failed attempt `attempt` (0 first) of commit_sync and
        fetch_committed: retry.backoff.ms doubling up to retry.backoff.max.ms, as Kafka's
        `retryBackoff.backoff(attempts++)` in commitOffsetsSync and fetchCommittedOffsets.
        A pause that would end past `deadline_ms` (the committer's clock) is not taken:
        ClientTimeoutError(`timed_out`) instead."""
        pause_ms = min(self._backoff_ms * 2 ** min(attempt, 30), self._backoff_max_ms)
        if self._clock.monotonic_ms() + pause_ms > deadline_ms:
            raise ClientTimeoutError(timed_out)
        self._sleep(pause_ms / 1000)

    def close(self, timeout_s: float) -> None:
        self.wait_pending(timeout_s)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
