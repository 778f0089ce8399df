"""Clock steps of one running process, as NTP stepping a machine's clock would: the process is
started with `clockstep.c` (built here with the system's C compiler) preloaded, which adds the
seconds written in a file of the process's own to every wall-clock reading (clock_gettime on
CLOCK_REALTIME, gettimeofday, time), re-read every half second. Writing `+600` steps its wall
clock 10 minutes ahead, `-600` 10 minutes back, `0` heals. Monotonic clocks, sleeps and timers
are untouched, and Python and gRPC's C core see the same stepped clock (a Python-level patch
of time.time would put gRPC's deadlines 10 minutes off: not a real machine).

Without a C compiler (gcc is on the project's machines) the clock scenarios skip, saying so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "clockstep.c"


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build_shim(out_dir: Path) -> Path:
    """Compile clockstep.c into `out_dir` (once per source version)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    library = out_dir / f"clockstep-{digest}.so"
    if not library.exists():
        cc = compiler()
        if cc is None:
            raise RuntimeError("no C compiler (cc/gcc) to build the clock shim")
        tmp = library.with_suffix(".tmp.so")
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SOURCE), "-ldl"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        tmp.replace(library)
    return library


class Clocks:
    """One offset file per process name; `env(name)` starts a process under it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.library = build_shim(run_dir)
        self.offsets: dict[str, int] = {}

    def file(self, name: str) -> Path:
        return self.run_dir / f"clock-{name}"

    def env(self, name: str) -> Mapping[str, str]:
        path = self.file(name)
        if not path.exists():
            path.write_text("0\n")
        return {"LD_PRELOAD": str(self.library), "RIVERLOG_FAULT_CLOCK_FILE": str(path)}

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
        time.sleep(0.6)  # a running process re-reads its file every 0.5 s

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
