"""glibc malloc settings for processes that move large messages (decision 0044).

With glibc's defaults a block of 128 KiB or more is its own `mmap`, and free memory over
128 KiB at the top of the heap goes back to the kernel. protobuf (upb) arenas, gRPC's buffers
and record-batch bytes of 128 KiB to a few MiB are allocated and freed once or more per
request, so every request paid fresh pages: page faults and zeroing by the kernel. On the
2-core development machine parsing and re-serializing a 1 MiB ProduceRequest took 1.7 to 8.8 ms
with the defaults and 0.1 to 0.2 ms with the settings below; a 128 KiB one 175 to 600 µs against
12 µs.

Services take the ceiling glibc's own dynamic threshold would reach (a 32 MiB mmap threshold,
twice that kept at the top of the heap): freed pages are kept for the next request instead of
being returned and faulted in again. Memory in use is unchanged; what a process may hold on to
beyond it is bounded by the trim threshold per malloc arena. SDK processes (the application's)
take less, 8 MiB and 16 MiB: enough for requests of max.request.size (1 MiB) and the consumer's
fetch answers of up to 4 MiB per partition (decision 0046: with 4 MiB / 8 MiB each such answer
was fresh pages again and the consumer's own CPU per 1 KiB record rose by about half), while a
producer with buffer.memory 32 MiB kept full stays under 100 MiB RSS (with the services'
settings it peaked at 100 MiB, 87 without).

Nothing happens when the C library is not glibc, when the environment already sets
`MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` (the operator's word wins), or when
`RIVERLOG_MALLOC_TUNING=0`."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from typing import Final

SERVICE: Final = (32 * 1024 * 1024, 64 * 1024 * 1024)  # (mmap threshold, trim threshold)
CLIENT: Final = (8 * 1024 * 1024, 16 * 1024 * 1024)
OPT_OUT_ENV: Final = "RIVERLOG_MALLOC_TUNING"
_M_TRIM_THRESHOLD: Final = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD: Final = -3
_OPERATOR_ENV: Final = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_lock = threading.Lock()
_applied: bool | None = None


def tune_malloc(thresholds: tuple[int, int] = SERVICE) -> bool:
    """Apply (mmap threshold, trim threshold) once per process (the first caller's); whether
    settings of ours are in effect."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _apply(os.environ, *thresholds)
        return _applied


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether this environment leaves malloc to us."""
    if environ.get(OPT_OUT_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return not any(name in environ for name in _OPERATOR_ENV)


def _apply(environ: Mapping[str, str], mmap_threshold: int, trim_threshold: int) -> bool:
    if not wanted(environ):
        return False
    try:
        # The process's own symbols, libc's among them: find_library would run ldconfig.
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
            return False  # not glibc (musl has no tunable thresholds)
        # The mmap threshold first: setting either one turns glibc's dynamic adjustment off.
        done = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
        return bool(done and libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    except OSError:
        return False
