"""A watchdog on a process's event loop: a node that stops heartbeating because its loop is
blocked (a synchronous call, a busy loop that never awaits, a deadlock) says so in its log,
with the loop thread's stack, instead of going silent until its lease lapses.

A daemon thread probes the loop every `interval_s` with `call_soon_threadsafe`; a probe not
answered within `threshold_s` is a stall. The thread logs the stall once (with the stack the
loop thread is stuck in), repeats the stack every `repeat_s` while it lasts, and the loop logs
how long it was blocked once it runs again. The thread only reads: it never touches the loop's
state, so a stalled loop stays as it is for the stack dump to show.

A stall that also holds the GIL (a deadlock inside a C extension) stops this thread too. With
`native_dump_after_s` the loop keeps re-arming `faulthandler.dump_traceback_later`, whose C
thread writes every thread's stack without the GIL if the loop misses that deadline. Services
leave it off: after a SIGSTOP longer than the deadline it fired on SIGCONT while the loop ran,
and walking a running thread's frames without the GIL broke the process (decision 0017).

The decisions are a pure state machine (`StallDetector`, explicit states and transitions on
times passed in) so they are unit tested without threads; `LoopWatchdog` is the thread.
"""

from __future__ import annotations

import asyncio
import enum
import faulthandler
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD_S = 1.0
DEFAULT_INTERVAL_S = 0.25
DEFAULT_REPEAT_S = 10.0


class LoopState(enum.Enum):
    IDLE = "idle"  # no probe outstanding
    PROBING = "probing"  # a probe was sent, not answered, within the threshold
    STALLED = "stalled"  # a probe has waited longer than the threshold


class Action(enum.Enum):
    NONE = "none"
    SEND_PROBE = "send-probe"
    REPORT_STALL = "report-stall"  # first report of this stall
    REPEAT_STALL = "repeat-stall"  # still stalled, `repeat_s` after the last report
    REPORT_RECOVERY = "report-recovery"


@dataclass(slots=True)
class StallDetector:
    """Transitions: IDLE -tick-> PROBING (send a probe); PROBING -tick past threshold->
    STALLED (report); STALLED -tick past repeat-> STALLED (report again); PROBING -answer->
    IDLE; STALLED -answer-> IDLE (report recovery). `lag_s` is the last answered probe's
    wait, `max_lag_s` the largest."""

    threshold_s: float = DEFAULT_THRESHOLD_S
    repeat_s: float = DEFAULT_REPEAT_S
    state: LoopState = LoopState.IDLE
    probe_sent: float = 0.0
    last_report: float = 0.0
    lag_s: float = 0.0
    max_lag_s: float = 0.0
    stalls: int = 0

    def tick(self, now: float) -> Action:
        """The watchdog thread's periodic step."""
        if self.state is LoopState.IDLE:
            self.state = LoopState.PROBING
            self.probe_sent = now
            return Action.SEND_PROBE
        waited = now - self.probe_sent
        if self.state is LoopState.PROBING:
            if waited < self.threshold_s:
                return Action.NONE
            self.state = LoopState.STALLED
            self.stalls += 1
            self.last_report = now
            return Action.REPORT_STALL
        if now - self.last_report >= self.repeat_s:
            self.last_report = now
            return Action.REPEAT_STALL
        return Action.NONE

    def answered(self, sent: float, now: float) -> Action:
        """The loop ran the probe sent at `sent` (a stale probe is ignored)."""
        if self.state is LoopState.IDLE or sent != self.probe_sent:
            return Action.NONE
        self.lag_s = now - sent
        self.max_lag_s = max(self.max_lag_s, self.lag_s)
        stalled = self.state is LoopState.STALLED
        self.state = LoopState.IDLE
        return Action.REPORT_RECOVERY if stalled else Action.NONE


def thread_stack(thread_id: int) -> str:
    """The current Python stack of a thread, innermost call last."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return "  (no such thread)"
    return "".join(traceback.format_stack(frame)).rstrip()


class LoopWatchdog:
    """Lifecycle: `start()` on the loop's thread (it records that thread), `stop()` from
    anywhere; a daemon thread, so it never holds the process up at exit."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str,
        *,
        threshold_s: float = DEFAULT_THRESHOLD_S,
        interval_s: float = DEFAULT_INTERVAL_S,
        repeat_s: float = DEFAULT_REPEAT_S,
        monotonic: Callable[[], float] = time.monotonic,
        native_dump_after_s: float | None = None,
    ) -> None:
        self._loop = loop
        self._native_dump_after_s = native_dump_after_s
        self._name = name
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._lock = threading.Lock()  # the detector is shared by the thread and the loop
        self.detector = StallDetector(threshold_s, repeat_s)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_thread_id = 0

    def start(self) -> None:
        self._loop_thread_id = threading.get_ident()
        self._thread = threading.Thread(
            target=self._run, name=f"{self._name}-loop-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._native_dump_after_s is not None:
            faulthandler.cancel_dump_traceback_later()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_s):
            now = self._monotonic()
            with self._lock:
                action = self.detector.tick(now)
                sent = self.detector.probe_sent
            if action is Action.SEND_PROBE:
                try:
                    self._loop.call_soon_threadsafe(self._answer, sent)
                except RuntimeError:
                    return  # the loop is closed: the process is on its way out
            elif action in (Action.REPORT_STALL, Action.REPEAT_STALL):
                log.error(
                    "%s: the event loop has not run for %.1f s (heartbeats, timers and "
                    "requests are all held up); it is in:\n%s",
                    self._name,
                    now - sent,
                    thread_stack(self._loop_thread_id),
                )

    def _answer(self, sent: float) -> None:
        if self._native_dump_after_s is not None and not self._stopping.is_set():
            faulthandler.dump_traceback_later(self._native_dump_after_s, exit=False)
        now = self._monotonic()
        with self._lock:
            action = self.detector.answered(sent, now)
            lag = self.detector.lag_s
        if action is Action.REPORT_RECOVERY:
            log.warning("%s: the event loop runs again after %.1f s blocked", self._name, lag)
