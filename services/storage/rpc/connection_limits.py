"""The direct port's connection limits (decision 0047): what keeps clients outside the cluster
from holding a storage node's descriptors and memory. The internal zero-copy port has none of
them (its clients are the cluster's own gateways and followers).

- `max.connections` in total and `max.connections.per.ip` per client address: a connection over
  either is closed as soon as it is accepted (Kafka's names; Kafka's defaults are unbounded,
  here 1000 and 100, and the total never above half the process's descriptor limit, so
  clients cannot run the node out of descriptors: a segment that cannot be opened takes its log
  dir offline);
- `direct.grant.timeout.ms`: a connection whose first grant frame is not taken within it is
  closed (before a grant, a client is nobody);
- `connections.max.idle.ms`: a granted connection that sent no frame for that long, with no
  fetch parked and no produce answer owed, is closed;
- `direct.max.request.bytes`: a produce frame announcing more is refused on its header, before
  anything is allocated for it (grant frames have their own cap, MAX_GRANT_BYTES).

The timeouts are enforced by one sweep task per port (a check every second or so), not by a
timer per read, so the frame path pays only a clock read per frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import time
from collections import Counter
from collections.abc import Callable

from ..config import ConnectionLimits

log = logging.getLogger(__name__)

_SWEEP_MAX_S = 1.0


def total_cap(limits: ConnectionLimits) -> int:
    """`max.connections`, at most half the process's descriptor limit (the rest is for
    segments, peers and the internal ports)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return limits.max_connections
    return max(1, min(limits.max_connections, soft // 2))


class Watched:
    """One direct-port connection as the sweep sees it. Event loop only."""

    __slots__ = ("busy", "conn", "granted", "ip", "last", "opened", "owed")

    def __init__(self, conn: socket.socket, ip: str, owed: Callable[[], bool]) -> None:
        self.conn = conn
        self.ip = ip
        self.opened = self.last = time.monotonic()
        self.granted = False
        self.busy = 0
        """Fetches being answered (a parked long poll is not idleness)."""
        self.owed = owed
        """Whether produce answers are still owed (neither is)."""

    def active(self) -> None:
        self.last = time.monotonic()


class ConnectionGuard:
    """Admission at accept and the sweep of stalled and idle connections, for one port."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.cap = total_cap(limits)
        self._per_ip: Counter[str] = Counter()
        self._open: set[Watched] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self.refused = 0
        """Connections closed at accept (over a cap)."""
        self.no_grant = 0
        """Connections closed for want of a grant in time."""
        self.idle = 0
        """Granted connections closed as idle."""

    @property
    def closed(self) -> dict[str, int]:
        """The connections this guard closed, by reason (riverlog_direct_connections_closed)."""
        return {"limit": self.refused, "no_grant": self.no_grant, "idle": self.idle}

    @property
    def open(self) -> int:
        return len(self._open)

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="direct-sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    def admit(self, conn: socket.socket, ip: str, owed: Callable[[], bool]) -> Watched | None:
        """The connection's watch, or None when it is over a cap (then it is closed here)."""
        if len(self._open) >= self.cap or self._per_ip[ip] >= self.limits.max_connections_per_ip:
            self.refused += 1
            if self.refused in (1, 10, 100) or self.refused % 1000 == 0:
                log.warning(
                    "direct: a connection from %s refused (open %d of %d, %d of %d from"
                    " this address; %d refused so far)",
                    ip,
                    len(self._open),
                    self.cap,
                    self._per_ip[ip],
                    self.limits.max_connections_per_ip,
                    self.refused,
                )
            conn.close()
            return None
        watched = Watched(conn, ip, owed)
        self._open.add(watched)
        self._per_ip[ip] += 1
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return watched

    def release(self, watched: Watched) -> None:
        if watched in self._open:
            self._open.discard(watched)
            self._per_ip[watched.ip] -= 1
            if self._per_ip[watched.ip] <= 0:
                del self._per_ip[watched.ip]

    def sweep(self, now: float) -> None:
        """Close the connections that waited too long for their grant, or are idle."""
        grant_s = self.limits.grant_timeout_ms / 1000
        idle_s = self.limits.idle_timeout_ms / 1000
        for watched in list(self._open):
            if not watched.granted:
                if now - watched.opened < grant_s:
                    continue
                self.no_grant += 1
                why = f"no grant within {self.limits.grant_timeout_ms} ms"
            elif now - watched.last >= idle_s and not watched.busy and not watched.owed():
                self.idle += 1
                why = f"idle for {self.limits.idle_timeout_ms} ms"
            else:
                continue
            log.info("direct %s: closing the connection (%s)", watched.ip, why)
            self.release(watched)
            # Its reader sees the end of the stream and closes its side.
            with contextlib.suppress(OSError):
                watched.conn.shutdown(socket.SHUT_RDWR)

    async def _sweep_forever(self) -> None:
        shortest = min(self.limits.grant_timeout_ms, self.limits.idle_timeout_ms) / 1000
        interval = min(max(shortest / 4, 0.01), _SWEEP_MAX_S)
        while True:
            await asyncio.sleep(interval)
            self.sweep(time.monotonic())
