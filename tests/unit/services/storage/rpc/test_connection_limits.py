"""The direct port's connection guard (rpc/connection_limits.py) on socket pairs: the caps at
admission, the grant deadline and the idle timeout, which spares a connection with a fetch
parked or produce answers owed. The sweep is given the time, so nothing waits."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from riverlog.services.storage.config import ConnectionLimits
from riverlog.services.storage.rpc.connection_limits import ConnectionGuard

pytestmark = pytest.mark.timeout(10)

LIMITS = ConnectionLimits(
    max_connections=3, max_connections_per_ip=2, grant_timeout_ms=1_000, idle_timeout_ms=5_000
)


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for a, b in made:
        a.close()
        b.close()


def _pair(pairs: list[tuple[socket.socket, socket.socket]]) -> tuple[socket.socket, socket.socket]:
    pair = socket.socketpair()
    pairs.append(pair)
    return pair


def _shut(sock: socket.socket) -> bool:
    """Whether the guard shut `sock` (its peer reads the end of the stream)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False


def test_caps_in_total_and_per_address(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    guard = ConnectionGuard(LIMITS)
    a = [guard.admit(_pair(pairs)[0], "10.0.0.1", lambda: False) for _ in range(3)]
    assert a[0] is not None and a[1] is not None and a[2] is None  # 2 per address
    assert guard.admit(_pair(pairs)[0], "10.0.0.2", lambda: False) is not None
    assert guard.admit(_pair(pairs)[0], "10.0.0.3", lambda: False) is None  # 3 in total
    assert guard.closed["limit"] == 2 and guard.open == 3
    guard.release(a[0])
    guard.release(a[0])  # twice (the sweep and the reader both release): counted once
    assert guard.admit(_pair(pairs)[0], "10.0.0.1", lambda: False) is not None
    assert guard.open == 3


def test_no_grant_in_time_and_idle_connections_are_shut(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    guard = ConnectionGuard(ConnectionLimits(grant_timeout_ms=1_000, idle_timeout_ms=5_000))
    owed = {"answers": False}
    (ungranted, u_peer), (idle, i_peer), (busy, b_peer), (owing, o_peer) = (
        _pair(pairs) for _ in range(4)
    )
    w_ungranted = guard.admit(ungranted, "a", lambda: False)
    w_idle = guard.admit(idle, "b", lambda: False)
    w_busy = guard.admit(busy, "c", lambda: False)
    w_owing = guard.admit(owing, "d", lambda: owed["answers"])
    assert None not in (w_ungranted, w_idle, w_busy, w_owing)
    assert w_idle and w_busy and w_owing and w_ungranted
    for w in (w_idle, w_busy, w_owing):
        w.granted = True
    w_busy.busy = 1  # a parked fetch
    owed["answers"] = True
    start = w_ungranted.opened  # the others were opened (and last active) just after
    guard.sweep(start + 0.5)
    assert guard.closed == {"limit": 0, "no_grant": 0, "idle": 0}
    guard.sweep(start + 1.0)
    assert _shut(u_peer) and guard.closed["no_grant"] == 1
    assert not _shut(i_peer)
    guard.sweep(start + 6.0)
    assert _shut(i_peer) and guard.closed["idle"] == 1
    assert not _shut(b_peer) and not _shut(o_peer)
    w_busy.busy = 0
    owed["answers"] = False
    guard.sweep(start + 6.0)
    assert _shut(b_peer) and _shut(o_peer) and guard.closed["idle"] == 3
    assert guard.open == 0
