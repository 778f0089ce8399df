"""Log dirs that fail: each storage node's log dir on a small tmpfs of its own, so a test can
fill it (a filler file takes every free byte: the node's next write fails with ENOSPC, as on
a full disk) and later free it. Root ignores permissions, so a full filesystem is how a test
running as root makes a log dir fail for real.

Each mount's source is named `rlft-<owner pid>` so `leftover_mounts` finds exactly what a run
that did not clean up left (its owner is gone), as `riverlog.cluster.netns` does for links.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PREFIX = "rlft-"


def _owner_alive(source: str) -> bool:
    tail = source[len(PREFIX) :]
    if not tail.isdigit():
        return False
    try:
        os.kill(int(tail), 0)
    except ProcessLookupError:
        return False
    return True


def _mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every tmpfs mount with our prefix."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith(PREFIX) and parts[2] == "tmpfs":
            out.append((parts[0], parts[1].replace("\\040", " ")))
    return out


def leftover_mounts() -> list[str]:
    return [point for source, point in _mounts() if not _owner_alive(source)]


def unmount(point: str) -> None:
    subprocess.run(["umount", "-l", point], capture_output=True, timeout=20, check=False)


class SmallDisks:
    """tmpfs log dirs of `size_mb` each. Lifecycle: mount(dir) before the node starts →
    fill(dir) / free(dir) → unmount_all() after the processes stopped."""

    def __init__(self, size_mb: int) -> None:
        self.size_mb = size_mb
        self.mounted: list[Path] = []

    def mount(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        source = f"{PREFIX}{os.getpid()}"
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", source, str(directory)],
            check=True,
            capture_output=True,
            timeout=20,
        )
        self.mounted.append(directory)

    @staticmethod
    def filler(directory: Path) -> Path:
        return directory / ".rlft-filler"

    def fill(self, directory: Path) -> int:
        """Take every free byte of `directory`'s filesystem; returns how many were taken."""
        taken = 0
        size = 1 << 20
        with open(self.filler(directory), "ab", buffering=0) as f:
            while size >= 1:
                try:
                    taken += f.write(b"\0" * size) or 0
                except OSError:  # ENOSPC: smaller pieces, until not even one byte fits
                    size //= 16
        return taken

    def free_bytes(self, directory: Path) -> int:
        stats = os.statvfs(directory)
        return stats.f_bavail * stats.f_frsize

    def free(self, directory: Path) -> None:
        self.filler(directory).unlink(missing_ok=True)

    def remaining(self) -> list[str]:
        """Mount points of ours still mounted."""
        points = {point for _, point in _mounts()}
        return [str(d) for d in self.mounted if str(d) in points]

    def unmount_all(self) -> None:
        for directory in self.mounted:
            unmount(str(directory))
