"""Periodic samples for the graphs: a consumer group's total lag and a topic's summed log end
offsets, taken in the console process with one signed-in user's client (so a graph never shows
what that principal may not describe) into bounded series.

Sampling is on demand: a page that shows a graph asks for its key (`watch`), and a key no page
has asked for in `idle_s` is dropped with its series (and at most MAX_KEYS are kept), so the
console samples only what someone is looking at. One daemon thread per session; a failed
sample is remembered as the key's error (shown beside the graph) and sampling goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from riverlog.client import AdminClient
from riverlog.common.errors import RiverlogError

from . import reads
from .series import Point, Series, rates, total_lag

LAG: Final = "lag"
ENDS: Final = "ends"
Key = tuple[str, str]  # (LAG, group id) or (ENDS, topic)
MAX_KEYS: Final = 100  # per session; the least recently asked for goes first


class Sampler:
    def __init__(
        self,
        admin: AdminClient,
        interval_s: float,
        capacity: int,
        idle_s: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._admin = admin
        self.interval_s = interval_s
        self._capacity = capacity
        self._idle_s = idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[Key, Series] = {}
        self._asked: dict[Key, float] = {}  # monotonic time a page last asked
        self._errors: dict[Key, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end, without waiting: this runs on the event loop (sign-out,
        expiry), and the session closes its client next, which ends a sample in progress
        with ClientClosedError."""
        self._stop.set()

    def watch(self, key: Key) -> None:
        """Sample `key` from now on (again), and keep it while pages ask for it."""
        with self._lock:
            if key not in self._asked and len(self._asked) >= MAX_KEYS:
                oldest = min(self._asked, key=self._asked.__getitem__)
                del self._asked[oldest]
                self._series.pop(oldest, None)
                self._errors.pop(oldest, None)
            self._asked[key] = time.monotonic()
            self._series.setdefault(key, Series(self._capacity))

    def points(self, key: Key) -> list[Point]:
        """The key's points: lag as sampled, end offsets as records per second."""
        self.watch(key)
        with self._lock:
            points = self._series[key].points()
        return rates(points) if key[0] == ENDS else points

    def error(self, key: Key) -> str:
        with self._lock:
            return self._errors.get(key, "")

    def _value(self, key: Key) -> float:
        kind, name = key
        if kind == LAG:
            return total_lag(p.lag for p in reads.group_lag(self._admin, name))
        return reads.topic_end_total(self._admin, name)

    def sample_once(self) -> None:
        """One sample of every key still asked for; idle keys are dropped first."""
        now = time.monotonic()
        with self._lock:
            for key in [k for k, t in self._asked.items() if now - t > self._idle_s]:
                del self._asked[key]
                self._series.pop(key, None)
                self._errors.pop(key, None)
            keys = list(self._asked)
        for key in keys:
            if self._stop.is_set():
                return
            try:
                value = self._value(key)
            except RiverlogError as e:
                with self._lock:
                    self._errors[key] = f"{e.code.name}: {e.message}"
                continue
            except Exception as e:  # a bug must not end sampling for every other key
                with self._lock:
                    self._errors[key] = f"{type(e).__name__}: {e}"
                continue
            with self._lock:
                series = self._series.get(key)
                if series is not None:  # (dropped meanwhile otherwise)
                    last, t = series.last, self._clock()
                    series.add(t if last is None else max(t, last.t), value)
                self._errors.pop(key, None)

    def _run(self) -> None:
        while not self._stop.is_set():  # (a sample cut short by close() fails and ends here)
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(self.interval_s - (time.monotonic() - started), 0.0))
