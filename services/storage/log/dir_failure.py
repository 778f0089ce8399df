"""Kafka's LogDirFailureChannel, minimally: a write to a log dir that fails with an I/O error
(a full disk, a dead device: OSError, or the KAFKA_STORAGE_ERROR the log layer turns it into)
takes that whole log dir offline, because what is on it can no longer be trusted to be
complete. Once every log dir of the node is offline the node halts at once, as a Kafka broker
does ("Shutdown broker because all log dirs in ... have failed"): it must not go on leading
partitions it cannot write, and its registration lapsing is what tells the controller to move
its leaderships. An offline dir stays offline until the process restarts (and recovers the
logs it finds there).

With several log dirs and only some offline, the node keeps serving the others and tells the
controller which replicas are on the offline ones (decision 0022): `on_offline` listeners run
once per failed dir (the app sends a heartbeat at once and stops placing new logs there), and
the node's heartbeats carry `offline_replicas` from then on, as a Kafka broker's carry its
offline log dirs. The controller takes those replicas out of the ISR, elects other leaders
for the partitions they led, and never elects them again until the node restarts; the
partitions on healthy dirs stay where they are.

Found by the log-dir-full scenario of tests/fault/test_network_faults.py (issue 12): with its
log dir full, a leader kept its leaderships and answered every produce with
KAFKA_STORAGE_ERROR until someone restarted it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from riverlog.common.errors import ErrorCode, RiverlogError

log = logging.getLogger(__name__)

HALT_STATUS = 1


def is_storage_error(exc: BaseException) -> bool:
    """True for a failure of the disk itself: an OSError, or the KAFKA_STORAGE_ERROR the log
    layer raised from one. Not for a log that is merely closed (a replica being stopped or
    deleted under a request answers KAFKA_STORAGE_ERROR too, with no OSError behind it)."""
    if isinstance(exc, RiverlogError):
        return exc.code == ErrorCode.KAFKA_STORAGE_ERROR and isinstance(exc.__cause__, OSError)
    return isinstance(exc, OSError)


def halt_process(status: int = HALT_STATUS) -> None:
    """Exit now, without cleanup (which would write to the failed dirs): Kafka's Exit.halt."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(status)


class LogDirFailureChannel:
    """Which log dirs are offline. `storage_error(dir, exc)` is called wherever a write to a
    partition's log failed; `on_offline` listeners run when a dir goes offline; `halt` runs
    once every dir is offline."""

    def __init__(self, log_dirs: Iterable[Path], halt: Callable[[], None] = halt_process) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.offline: set[Path] = set()
        self.on_offline: list[Callable[[Path], None]] = []
        self._halt = halt

    def is_offline(self, log_dir: Path | None) -> bool:
        return log_dir is not None and Path(log_dir) in self.offline

    def storage_error(self, log_dir: Path | None, exc: BaseException) -> None:
        """Take `log_dir` offline after `exc` (ignored unless `is_storage_error(exc)`)."""
        if log_dir is None or not is_storage_error(exc):
            return
        log_dir = Path(log_dir)
        if log_dir not in self.offline:
            self.offline.add(log_dir)
            log.error("log dir %s is offline after an I/O error: %s", log_dir, exc)
            if self.offline < set(self.log_dirs):
                for listener in self.on_offline:
                    listener(log_dir)
        if self.offline >= set(self.log_dirs):
            log.critical(
                "shutting down: every log dir (%s) has failed",
                ", ".join(str(d) for d in self.log_dirs),
            )
            self._halt()
