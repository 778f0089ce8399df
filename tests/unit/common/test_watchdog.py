"""The event-loop watchdog: the stall detector's transitions, and a real loop blocked by a
synchronous call is named in the log with the call's stack, then its recovery."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time

import pytest

from riverlog.common.watchdog import Action, LoopState, LoopWatchdog, StallDetector


def test_a_probe_answered_within_the_threshold_is_no_stall() -> None:
    detector = StallDetector(threshold_s=1.0)
    assert detector.tick(10.0) is Action.SEND_PROBE
    assert detector.tick(10.5) is Action.NONE
    assert detector.answered(10.0, 10.6) is Action.NONE
    assert detector.state is LoopState.IDLE
    assert detector.lag_s == pytest.approx(0.6)
    assert detector.stalls == 0


def test_a_stall_is_reported_once_then_repeated_then_its_recovery() -> None:
    detector = StallDetector(threshold_s=1.0, repeat_s=10.0)
    detector.tick(0.0)
    assert detector.tick(1.0) is Action.REPORT_STALL
    assert detector.state is LoopState.STALLED
    assert detector.tick(5.0) is Action.NONE
    assert detector.tick(11.0) is Action.REPEAT_STALL
    assert detector.tick(12.0) is Action.NONE
    assert detector.answered(0.0, 12.5) is Action.REPORT_RECOVERY
    assert (detector.state, detector.stalls) == (LoopState.IDLE, 1)
    assert detector.max_lag_s == pytest.approx(12.5)
    assert detector.tick(13.0) is Action.SEND_PROBE  # probing again


def test_a_stale_answer_does_not_end_a_newer_probe() -> None:
    detector = StallDetector(threshold_s=1.0)
    detector.tick(0.0)
    detector.answered(0.0, 0.1)
    detector.tick(1.0)
    assert detector.answered(0.0, 1.1) is Action.NONE
    assert detector.state is LoopState.PROBING


def _block_the_loop_synchronously(seconds: float) -> None:
    time.sleep(seconds)  # the fault under test: a synchronous call on the event loop


async def test_a_blocked_loop_is_named_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="riverlog.common.watchdog")
    watchdog = LoopWatchdog(asyncio.get_running_loop(), "test", threshold_s=0.2, interval_s=0.05)
    watchdog.start()
    try:
        await asyncio.sleep(0.2)  # probes answered while the loop runs
        _block_the_loop_synchronously(1.0)
        # The loop runs again: the recovery line is logged by the next probe answer.
        for _ in range(100):
            if watchdog.detector.stalls and watchdog.detector.state is LoopState.IDLE:
                break
            await asyncio.sleep(0.02)
    finally:
        watchdog.stop()
    stalls = [r for r in caplog.records if "has not run for" in r.getMessage()]
    assert stalls, caplog.text
    assert "_block_the_loop_synchronously" in stalls[0].getMessage()
    assert any("runs again after" in r.getMessage() for r in caplog.records), caplog.text
    assert watchdog.detector.max_lag_s >= 0.2


_GIL_HOLDER = """
import asyncio
from riverlog.common.watchdog import LoopWatchdog

def hold_the_gil_in_c():
    return sum(range(100_000_000))  # one C call: no other Python thread runs meanwhile

async def main():
    watchdog = LoopWatchdog(
        asyncio.get_running_loop(), "child", threshold_s=5.0, interval_s=0.05,
        native_dump_after_s=0.3,
    )
    watchdog.start()
    await asyncio.sleep(0.3)  # probes answered: the native deadline is armed
    hold_the_gil_in_c()
    watchdog.stop()

asyncio.run(main())
"""


def test_a_stall_holding_the_gil_is_dumped_by_the_native_thread() -> None:
    """The Python watchdog thread cannot run while a C call holds the GIL; faulthandler's C
    thread still writes the stacks, naming the call."""
    done = subprocess.run(
        [sys.executable, "-c", _GIL_HOLDER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "hold_the_gil_in_c" in done.stderr, done.stderr
