"""The storage node's incarnation (what its registration and AlterPartition requests carry,
so the controller tells a restarted node from the one before it): the wall clock in ns, but
never at or below the incarnation a previous run of this node recorded in its log dirs.

A registration meeting a live one with a higher incarnation is refused (NODE_ID_IN_USE: it
looks like a second process with the same id). With `time.time_ns()` alone, a node restarted
after kill -9 while its clock was stepped back (NTP) was refused and exited: found by the
clock-leader-10m-restart fault scenario (tests/fault, issue 12). Recording the last
incarnation next to the logs keeps it growing across restarts whatever the clock does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

INCARNATION_FILE = "node.incarnation"


def _recorded(log_dir: Path) -> int:
    try:
        return int((log_dir / INCARNATION_FILE).read_text().strip())
    except (OSError, ValueError):
        return 0


def next_incarnation(log_dirs: Iterable[Path], now_ns: int) -> int:
    """max(now, every recorded incarnation + 1), recorded again in each dir (best effort: a
    dir that cannot be written only loses the guarantee for the next restart)."""
    dirs = [Path(d) for d in log_dirs]
    last = max((_recorded(d) for d in dirs), default=0)
    incarnation = max(now_ns, last + 1)
    if incarnation != now_ns:
        log.warning(
            "the wall clock (%d ns) is behind the last incarnation %d: using %d",
            now_ns,
            last,
            incarnation,
        )
    for log_dir in dirs:
        path = log_dir / INCARNATION_FILE
        tmp = path.with_name(f".{INCARNATION_FILE}.tmp")
        try:
            tmp.write_text(f"{incarnation}\n")
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("cannot record the incarnation in %s: %s", log_dir, exc)
    return incarnation
