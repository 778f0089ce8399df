"""Loaded at start-up by the Python of a fault-test process whose PYTHONPATH names this
folder (see `tests/fault/clock.py`): moves that process's wall clock — time.time and
time.time_ns, which riverlog.common.clock.SystemClock and logging read — by the number of
seconds in the file $RIVERLOG_FAULT_CLOCK_FILE, re-read every half second, so a test can step
one running node's clock as NTP would. Monotonic clocks are left alone."""

from __future__ import annotations

import os
import time as _time

_FILE = os.environ.get("RIVERLOG_FAULT_CLOCK_FILE")

if _FILE:
    _real_time = _time.time
    _real_time_ns = _time.time_ns
    _monotonic = _time.monotonic
    _state = [0, -1.0]  # offset in ns, next re-read (monotonic s)

    def _offset_ns() -> int:
        now = _monotonic()
        if now >= _state[1]:
            _state[1] = now + 0.5
            try:
                with open(_FILE) as f:
                    _state[0] = int(float(f.read().strip() or 0) * 1e9)
            except (OSError, ValueError):
                pass
        return int(_state[0])

    def time() -> float:
        return _real_time() + _offset_ns() / 1e9

    def time_ns() -> int:
        return _real_time_ns() + _offset_ns()

    _time.time = time
    _time.time_ns = time_ns
