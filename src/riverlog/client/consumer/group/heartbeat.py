"""The group member's heartbeat thread: heartbeats every heartbeat.interval.ms while the member
is in a stable generation, and leaves the group when poll() has not been called for
max.poll.interval.ms (Kafka's AbstractCoordinator.HeartbeatThread).

Threads: `HeartbeatThread` runs `tick()` on its own daemon thread; the consumer's thread calls
only `poll_called()`, `reset()`, `wake()` and `stop()`. What a heartbeat answer means for the
member (rejoin, reset the generation, a fatal fence) is decided by the coordinator in
`on_heartbeat_result`, under its lock; the RPC itself is sent without holding that lock, so a
slow coordinator never blocks the consumer's thread. Unit tests call `tick(now_ms)` directly
with a manual clock and never start the thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError

from .api import GroupApi, GroupMember

log = logging.getLogger(__name__)

IDLE_WAIT_MS = 100


class HeartbeatTarget(Protocol):
    """What the heartbeat thread asks of the member (ConsumerCoordinator implements it)."""

    def heartbeat_member(self) -> GroupMember | None:
        """The identity to heartbeat with, or None when not in a stable generation."""
        ...

    def on_heartbeat_result(self, member: GroupMember, code: ErrorCode) -> None:
        """Apply a heartbeat's answer (only if `member` is still the current generation)."""
        ...

    def leave_on_poll_timeout(self) -> bool:
        """max.poll.interval.ms passed without poll(): leave the group. True if it was in one."""
        ...


class HeartbeatThread:
    """Heartbeat timers plus the thread that runs them; one per group member."""

    def __init__(
        self,
        target: HeartbeatTarget,
        api: GroupApi,
        clock: Clock,
        *,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        name: str = "riverlog-heartbeat",
    ) -> None:
        self._target = target
        self._api = api
        self._clock = clock
        self._interval_ms = heartbeat_interval_ms
        self._max_poll_interval_ms = max_poll_interval_ms
        self._timeout_s = min(request_timeout_ms, heartbeat_interval_ms * 3) / 1000
        self._backoff_ms = retry_backoff_ms
        now = clock.monotonic_ms()
        self.last_poll_ms = now
        self.next_heartbeat_ms = now
        self.last_success_ms = now
        self.sent = 0
        self._stop = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self._name = name

    # ---- consumer thread -----------------------------------------------------------------

    def poll_called(self) -> None:
        self.last_poll_ms = self._clock.monotonic_ms()

    def reset(self) -> None:
        """A new generation: the first heartbeat is one interval away."""
        now = self._clock.monotonic_ms()
        self.next_heartbeat_ms = now + self._interval_ms
        self.last_success_ms = now

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wakeup.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    # ---- heartbeat thread ----------------------------------------------------------------

    def _run(self) -> None:
        delay_ms = 0
        while not self._stop.is_set():
            if delay_ms > 0:
                self._wakeup.wait(delay_ms / 1000)
                self._wakeup.clear()
                if self._stop.is_set():
                    return
            try:
                delay_ms = self.tick(self._clock.monotonic_ms())
            except Exception:
                log.exception("heartbeat round failed")
                delay_ms = max(self._backoff_ms, IDLE_WAIT_MS)

    def tick(self, now_ms: int) -> int:
        """One round: leave on poll timeout, or heartbeat when due. Returns the milliseconds
        until the next round is useful."""
        if now_ms - self.last_poll_ms > self._max_poll_interval_ms:
            if self._target.leave_on_poll_timeout():
                log.warning(
                    "consumer poll timeout expired: poll() was not called for %d ms "
                    "(max.poll.interval.ms %d); the member left the group and rejoins at the "
                    "next poll()",
                    now_ms - self.last_poll_ms,
                    self._max_poll_interval_ms,
                )
            return IDLE_WAIT_MS
        member = self._target.heartbeat_member()
        if member is None:
            return IDLE_WAIT_MS
        if now_ms < self.next_heartbeat_ms:
            return min(self.next_heartbeat_ms - now_ms, self._time_to_poll_timeout(now_ms))
        self.sent += 1
        try:
            code = self._api.heartbeat(member, self._timeout_s)
        except RiverlogError as e:
            code = e.code
        now_ms = self._clock.monotonic_ms()
        if code == ErrorCode.NONE:
            self.last_success_ms = now_ms
            self.next_heartbeat_ms = now_ms + self._interval_ms
        elif code in (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.REQUEST_TIMED_OUT,
        ):
            self.next_heartbeat_ms = now_ms + self._backoff_ms
        else:
            self.next_heartbeat_ms = now_ms + self._interval_ms
        self._target.on_heartbeat_result(member, code)
        return max(self.next_heartbeat_ms - now_ms, 1)

    def _time_to_poll_timeout(self, now_ms: int) -> int:
        return max(self.last_poll_ms + self._max_poll_interval_ms - now_ms + 1, 1)
