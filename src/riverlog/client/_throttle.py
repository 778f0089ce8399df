"""Quota throttling as the SDK sees it: how long to leave a gateway alone, and the metrics.

A gateway that throttles a client answers normally with `throttle_time_ms` > 0 (Kafka's
quota protocol): the client must send that gateway nothing until the time has passed (Kafka
clients mute the connection; a gateway that receives a request early holds it back anyway, so
obeying also keeps requests from piling up in the gateway). `ThrottleTracker` remembers, per
gateway address index, until when it is throttled, and keeps Kafka's client metrics
`<prefix>-throttle-time-avg` and `-max` over the last `sample_window_s` (Kafka's
metrics.sample.window.ms x metrics.num.samples = 30 s x 2): every response's throttle time is
a sample, 0 included, as Kafka's sensors record it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

_SAMPLE_WINDOW_S = 60.0


class ThrottleTracker:
    """Thread-safe: the producer's sender thread, a consumer's poll and gRPC callbacks may all
    call it."""

    def __init__(
        self,
        sample_window_s: float = _SAMPLE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._until: dict[int, float] = {}
        self._samples: deque[tuple[float, int]] = deque()
        self._window_s = sample_window_s
        self._clock = clock
        self.total_throttled = 0

    def record(self, server: int, throttle_time_ms: int) -> None:
        """A response from gateway `server` said `throttle_time_ms`."""
        now = self._clock()
        with self._lock:
            self._samples.append((now, max(throttle_time_ms, 0)))
            self._expire(now)
            if throttle_time_ms > 0:
                self.total_throttled += 1
                until = now + throttle_time_ms / 1000
                if until > self._until.get(server, 0.0):
                    self._until[server] = until

    def remaining_s(self, server: int) -> float:
        """How long gateway `server` must still be left alone (0.0: not throttled)."""
        until = self._until.get(server)
        if until is None:
            return 0.0
        return max(until - self._clock(), 0.0)

    def _expire(self, now: float) -> None:
        horizon = now - self._window_s
        samples = self._samples
        while samples and samples[0][0] < horizon:
            samples.popleft()

    def metrics(self, prefix: str) -> dict[str, float]:
        """`{prefix}-throttle-time-avg` and `-max` in ms over the sample window (0.0 when no
        response arrived in it)."""
        with self._lock:
            self._expire(self._clock())
            values = [v for _, v in self._samples]
        avg = sum(values) / len(values) if values else 0.0
        return {
            f"{prefix}-throttle-time-avg": avg,
            f"{prefix}-throttle-time-max": float(max(values, default=0)),
        }
