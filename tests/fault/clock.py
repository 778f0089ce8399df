"""Clock jumps of one running process. The services read wall-clock time through
`riverlog.common.clock.SystemClock` (time.time_ns), which cannot be reached from outside a
running process, so a process that may jump is started with `clockshim/` on its PYTHONPATH: its
`sitecustomize` moves time.time and time.time_ns by the seconds in a file of the process's own,
re-read every half second. Writing `+600` there steps its wall clock 10 minutes ahead, `-600`
10 minutes back, `0` heals; monotonic clocks stay as they are, as when NTP steps a real
machine's clock.

Why not libfaketime: Debian's (0.9.10) makes every sleep on the monotonic clock fail with
EINVAL once FAKETIME_DONT_FAKE_MONOTONIC is set, and without it a jump moves the monotonic clock
too (backwards, for -10 min), which no real machine does.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

SHIM = Path(__file__).resolve().parent / "clockshim"


class Clocks:
    """One offset file per process name; `env(name)` starts a process under it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.offsets: dict[str, int] = {}

    def file(self, name: str) -> Path:
        return self.run_dir / f"clock-{name}"

    def env(self, name: str, pythonpath: str = "") -> Mapping[str, str]:
        path = self.file(name)
        if not path.exists():
            path.write_text("0\n")
        paths = [str(SHIM), *([pythonpath] if pythonpath else [])]
        return {"RIVERLOG_FAULT_CLOCK_FILE": str(path), "PYTHONPATH": ":".join(paths)}

    def jump(self, name: str, seconds: int) -> None:
        """Set `name`'s wall clock `seconds` away from the real one (0: heal); returns once a
        process started the same way reads the new time, and the shim's re-read interval has
        passed (bounded)."""
        path = self.file(name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{seconds:+d}\n")
        tmp.replace(path)
        self.offsets[name] = seconds
        deadline = time.monotonic() + 10
        while abs(self.observed_offset(name) - seconds) > 5:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the clock shim did not apply {seconds:+d} s for {name}")
            time.sleep(0.2)
        time.sleep(0.6)  # the running process re-reads its file every 0.5 s

    def observed_offset(self, name: str) -> float:
        """What a fresh Python under `name`'s settings sees, minus the real time (s)."""
        out = subprocess.run(
            [sys.executable, "-c", "import time; print(time.time())"],
            env=dict(self.env(name)),
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return float(out.stdout.strip()) - time.time()
