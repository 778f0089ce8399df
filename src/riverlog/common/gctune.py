"""Python's cyclic garbage collector in service processes (decision 0019, 2026-11-28 addendum).

A service imports gRPC, protobuf, OpenTelemetry and its own modules, then builds its state:
some fifty thousand container objects that live as long as the process. Each full
(generation 2) collection walked all of them on the event loop while requests waited: 13 to
18 ms in a running gateway or storage node. Once the process is serving, `freeze_startup_objects()`
runs one collection and moves every survivor to the permanent generation (`gc.freeze()`), which
the collector no longer scans; a later full collection walks only what the process made since.
The process is already accepting then, so objects of the first requests in flight are frozen
too: those that become cyclic garbage later are never freed, a one-time leak bounded by what
was in flight at that moment.

`RIVERLOG_GC_FREEZE=0` leaves the collector as Python sets it."""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from typing import Final

OPT_OUT_ENV: Final = "RIVERLOG_GC_FREEZE"


def freeze_startup_objects(env: Mapping[str, str] = os.environ) -> bool:
    """Collect once, then freeze what is alive; whether it did (not when opted out)."""
    if env.get(OPT_OUT_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return False
    gc.collect()
    gc.freeze()
    return True
