"""Grants for direct data access (decision 0047): what lets the SDK send fetch (or produce)
frames straight to a partition leader's direct port instead of through a gateway. One keeper
serves the consumer (READ) and the producer (WRITE); each keeps its own connections.

A grant is asked of the gateway (`GrantDataAccess`) per (storage node, operation), naming every
topic the client uses on that node (a topic not covered yet asks for a new one covering the
old ones too). The keeper never waits: `lookup` answers at once with the grant to use, PENDING
(one is on its way: the consumer fetches through the gateway this time, the producer waits;
the answer's arrival calls `on_ready`) or None (use the gateway for that node).

Renewal: once `renew_fraction` of the current grant's bytes are used, or of its lifetime has
passed, the next one is asked in the background and kept aside when it comes; the current one
serves until it is spent (the local count reaches its budget, or the node answered
DELEGATION_TOKEN_EXPIRED) or is within its slack of its expiry (`expiry_slack_s`, at most a
tenth of its life), and only then is the
next one taken: the budget already charged to the quota is used to the end. A grant is not
used before its throttle time has passed (`DataGrant.usable_at`, the callers check). Its
lifetime is the gateway's `lifetime_ms`, counted on the client's monotonic clock from when it
was asked (always before the node's count starts, however late the answer is collected; a
client's wall clock far off does not make it expire at once); an older gateway's answer
without it falls back to `expires_at_ms` against the wall clock. A grant already unusable when
it arrives sends the node to the gateway for `backoff_max_s` (no loop of asks). A fresh grant
the node refuses as expired on its grant frame, nothing spent under it (the node's clock ahead
by more than its life): the gateway for that node for `fallback_s`, with a warning.

Where direct access cannot be had the answer is None: the cluster offers none
(DELEGATION_TOKEN_AUTH_DISABLED, or a gateway without the RPC: every node, for
`fallback_s`), the node has no direct port or is unknown or unreachable (that node, for
`fallback_s`), a grant below `min_budget` (a quota capped it: that node until the grant would
have expired), a topic refused (TOPIC_AUTHORIZATION_FAILED: that topic on that node, for
`fallback_s`; the other topics keep their grant), a failed call (that node, for `backoff_s`
doubling up to `backoff_max_s`, unless a current grant still serves), the quota holding the
client back (an answer without a grant: until its throttle time has passed).

Threads: `lookup`, `collect`, `expired`, `unreachable` and `close` take the lock; `spend` and
`direct` take none and are called only by the owner's thread (the producer's sender, the
consumer's poll), as `lookup` is in practice. The grant futures' callbacks only call
`on_ready`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import grpc

from riverlog.common.errors import ErrorCode
from riverlog.v1 import gateway_pb2

from ._connection import GatewayConnection, rpc_error

log = logging.getLogger(__name__)

__all__ = [
    "PENDING",
    "READ",
    "WRITE",
    "DataGrant",
    "GrantFuture",
    "GrantKeeper",
    "GrantSettings",
    "gateway_asker",
]

READ: Final = gateway_pb2.DATA_ACCESS_READ
WRITE: Final = gateway_pb2.DATA_ACCESS_WRITE


class _Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Final = _Pending()
"""`lookup`'s answer while a grant is on its way."""


class GrantFuture(Protocol):
    """A GrantDataAccess call on its way (a gRPC future, or a test's)."""

    def done(self) -> bool: ...
    def result(self, timeout: float | None = None) -> Any: ...
    def add_done_callback(self, fn: Callable[[Any], object]) -> Any: ...
    def cancel(self) -> bool: ...


Asker = Callable[[int, frozenset[str]], GrantFuture]
"""Starts GrantDataAccess for (node, topics); raises if it cannot be sent."""


@dataclass(frozen=True, slots=True)
class GrantSettings:
    renew_fraction: float = 0.5
    """The next grant is asked once this share of the current one's bytes, or life, is used."""
    expiry_slack_s: float = 1.0
    """A grant is not used this close to its expiry (clocks, frames in flight); at most a
    tenth of the grant's life."""
    min_budget: int = 0
    """A grant below this many bytes is not used (the producer: max.request.size, since a
    frame may overdraw a budget by its own size): the gateway until it would have expired."""
    reserve_bytes: int = 0
    """A grant counts as spent once fewer bytes than this are left (0: once none are): the
    producer's largest frame, which the node refuses when the budget left cannot pay for it."""
    fallback_s: float = 300.0
    """metadata.max.age.ms: how long a refusal sends a node (or topic) to the gateway."""
    backoff_s: float = 0.1
    backoff_max_s: float = 1.0
    """After a failed call: the gateway for backoff_s, doubling up to backoff_max_s."""
    collect_in_lookup: bool = True
    """Whether `lookup` takes a call's answer as soon as it is there; False: only `collect`
    does (the producer, at the start of a sender turn, so that every partition of one drain
    sees the same answer and one request is not split between the gateway and a node)."""


@dataclass(frozen=True, slots=True)
class DataGrant:
    """One grant as the gateway gave it; `serial` tells grants of one keeper apart (a
    connection that carries an older one sends the new one before its next frame)."""

    node_id: int
    topics: frozenset[str]
    token: bytes
    byte_budget: int
    host: str
    port: int
    usable_at: float  # monotonic: its throttle time has passed (not used before)
    renew_at: float  # monotonic: ask for the next one (meanwhile this one serves)
    usable_until: float  # monotonic: its expiry less the slack
    serial: int


@dataclass(eq=False, slots=True)
class _Node:
    current: DataGrant | None = None
    spent: int = 0  # bytes used under `current`
    next: DataGrant | None = None  # asked ahead, taken once `current` is spent
    pending: GrantFuture | None = None
    pending_topics: frozenset[str] = frozenset()
    asked_at: float = 0.0  # when `pending` was asked: a grant's life counts from there
    wanted: set[str] = field(default_factory=set)  # topics to cover at the next ask
    refused: dict[str, float] = field(default_factory=dict)  # topic -> the gateway until
    gateway_until: float = 0.0
    ask_after: float = 0.0  # no new ask before (a throttle, a failed call)
    failures: int = 0
    granted: int = 0


class GrantKeeper:
    """The grants of one client for one operation (READ or WRITE), by node."""

    def __init__(
        self,
        ask: Asker,
        settings: GrantSettings,
        on_ready: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._ask_fn = ask
        self._settings = settings
        self._on_ready = on_ready
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._nodes: dict[int, _Node] = {}
        self._disabled_until = 0.0  # the whole cluster: no direct access until
        self._serial = 0
        self.granted = 0
        """Grants obtained since the start (tests and metrics: the direct path was taken)."""
        self.renewed = 0
        """...of which replaced an earlier grant of the same node."""

    # ---- the callers' side ------------------------------------------------------------

    def lookup(
        self, node_id: int, topics: Iterable[str], now: float | None = None
    ) -> DataGrant | _Pending | None:
        """The grant to use for `topics` on `node_id` (check its `usable_at`), PENDING (one
        is on its way: `on_ready` is called when it comes), or None (use the gateway)."""
        if now is None:
            now = self._clock()
        with self._lock:
            if now < self._disabled_until:
                return None
            node = self._nodes.get(node_id)
            if node is None:
                node = self._nodes[node_id] = _Node()
            if self._settings.collect_in_lookup and node.pending is not None:
                self._collect(node_id, node, now)
                if now < self._disabled_until:
                    return None
            if now < node.gateway_until:
                return None
            names = topics if isinstance(topics, (set, frozenset)) else set(topics)
            refused = node.refused
            if refused and any(refused.get(t, 0.0) > now for t in names):
                return None
            grant = self._current(node, now)
            if grant is not None and not grant.topics.issuperset(names):
                upcoming = node.next
                if upcoming is not None and upcoming.topics.issuperset(names):
                    self._switch(node, upcoming)
                    grant = upcoming
                else:
                    node.wanted.update(names)
                    self._ask(node_id, node, now)
                    return PENDING if node.pending is not None else None
            if grant is None:
                node.wanted.update(names)
                self._ask(node_id, node, now)
                return PENDING if node.pending is not None else None
            settings = self._settings
            if node.next is None and (
                now >= grant.renew_at
                or node.spent >= grant.byte_budget * settings.renew_fraction
                or grant.byte_budget - node.spent < 2 * settings.reserve_bytes
            ):
                self._ask(node_id, node, now)
            return grant

    def collect(self, now: float | None = None) -> None:
        """Take the answers of the calls that ended (see `collect_in_lookup`)."""
        if now is None:
            now = self._clock()
        with self._lock:
            for node_id, node in list(self._nodes.items()):
                if node.pending is not None:
                    self._collect(node_id, node, now)

    def spend(self, node_id: int, serial: int, nbytes: int) -> None:
        """`nbytes` were read or sent under grant `serial` of `node_id` (the node charges a
        fetch answer's records and header, a produce frame's bytes)."""
        node = self._nodes.get(node_id)
        if node is not None and node.current is not None and node.current.serial == serial:
            node.spent += nbytes

    def expired(self, node_id: int, serial: int, grant_frame: bool = False) -> None:
        """The node answered DELEGATION_TOKEN_EXPIRED under grant `serial`: it is spent.
        `grant_frame`: the answer was to the grant frame itself; with nothing spent under the
        grant it was refused fresh (the node's clock ahead by more than its life): asking
        again would loop, so the gateway for that node for `fallback_s`."""
        with self._lock:
            node = self._nodes.get(node_id)
            if node is None or node.current is None or node.current.serial != serial:
                return
            if grant_frame and node.spent == 0:
                log.warning(
                    "node %d refused a fresh grant as expired (its clock ahead of the gateway's"
                    " by more than the grant's life? clock skew): the gateway for %.0f s",
                    node_id,
                    self._settings.fallback_s,
                )
                self._fall_back(node, self._clock() + self._settings.fallback_s)
                return
            node.spent = max(node.spent, node.current.byte_budget)  # (past any reserve)

    def unreachable(self, node_id: int) -> None:
        """The node's direct port refused a connection, or its grant: the gateway for that
        node for `fallback_s`."""
        with self._lock:
            node = self._nodes.setdefault(node_id, _Node())
            self._fall_back(node, self._clock() + self._settings.fallback_s)

    def direct(self, node_id: int, now: float) -> bool:
        """Whether `node_id` may be used directly at all now (not sent to the gateway)."""
        node = self._nodes.get(node_id)
        return now >= self._disabled_until and (node is None or now >= node.gateway_until)

    def close(self) -> None:
        with self._lock:
            pending = [n.pending for n in self._nodes.values() if n.pending is not None]
            for node in self._nodes.values():
                node.pending = None
        for future in pending:
            future.cancel()

    # ---- inside the lock --------------------------------------------------------------

    def _collect(self, node_id: int, node: _Node, now: float) -> None:
        future = node.pending
        if future is not None and future.done():
            node.pending = None
            self._answered(node_id, node, future, now)

    def _current(self, node: _Node, now: float) -> DataGrant | None:
        """The grant serving now: the current one unless spent or near its expiry, then the
        next one (the lazy switch), if any."""
        grant = node.current
        if (
            grant is not None
            and grant.byte_budget - node.spent >= max(self._settings.reserve_bytes, 1)
            and now < grant.usable_until
        ):
            return grant
        upcoming = node.next
        if upcoming is not None and now < upcoming.usable_until:
            self._switch(node, upcoming)
            return upcoming
        if grant is not None:
            node.wanted.update(grant.topics)  # asked for again with the topics wanted now
        node.current = node.next = None
        return None

    def _switch(self, node: _Node, grant: DataGrant) -> None:
        node.current, node.next, node.spent = grant, None, 0

    def _ask(self, node_id: int, node: _Node, now: float) -> None:
        if node.pending is not None or now < node.ask_after:
            return
        topics = frozenset(node.wanted)
        if node.current is not None:
            topics |= node.current.topics
        if node.next is not None:
            topics |= node.next.topics
        topics = frozenset(t for t in topics if node.refused.get(t, 0.0) <= now)
        if not topics:
            return
        try:
            future = self._ask_fn(node_id, topics)
        except Exception:
            self._failed(node, now)
            return
        node.pending, node.pending_topics, node.asked_at = future, topics, now
        node.wanted = set()
        future.add_done_callback(lambda _: self._on_ready())

    def _answered(self, node_id: int, node: _Node, future: GrantFuture, now: float) -> None:
        topics = node.pending_topics
        settings = self._settings
        try:
            response: gateway_pb2.GrantDataAccessResponse = future.result()
        except Exception as exc:
            node.wanted.update(topics)
            failed = rpc_error(exc).code
            if failed in (ErrorCode.UNSUPPORTED_VERSION, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED):
                self._disable_all(now)  # a gateway without the RPC (UNIMPLEMENTED)
            else:
                self._failed(node, now)
            return
        code = int(response.error_code)
        if code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED:
            self._disable_all(now)
            return
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            # Nothing granted: the topics new in this ask are refused (all of them if none
            # was new); the gateway reports the refusal per partition, as it always did.
            known = node.current.topics if node.current is not None else frozenset()
            refused = (topics - known) or topics
            for topic in refused:
                node.refused[topic] = now + settings.fallback_s
            if refused == topics:
                node.current = node.next = None
            node.wanted.update(topics - refused)
            node.wanted.difference_update(refused)
            return
        if code != ErrorCode.NONE or not response.direct_port:
            self._fall_back(node, now + settings.fallback_s)  # UNKNOWN_NODE, no direct port
            return
        throttle_s = max(response.throttle_time_ms, 0) / 1000
        if not response.grant:  # the quota holds the client back: ask again after it
            node.wanted.update(topics)
            node.ask_after = now + throttle_s
            if self._current(node, now) is None:
                node.gateway_until = now + throttle_s
            return
        if response.lifetime_ms > 0:
            life_s = response.lifetime_ms / 1000
            born = min(node.asked_at, now)  # the node counts from after the ask
        else:  # an older gateway: its wall clock against ours
            life_s = max(response.expires_at_ms / 1000 - self._wall(), 0.0)
            born = now
        usable_until = born + life_s - min(settings.expiry_slack_s, life_s / 10)
        if now >= usable_until:  # unusable on arrival: do not ask again at once
            log.warning(
                "node %d: a grant arrived already expired (life %.1f s): the gateway for %.1f s",
                node_id,
                life_s,
                settings.backoff_max_s,
            )
            self._fall_back(node, now + settings.backoff_max_s)
            node.wanted.update(topics)
            return
        if response.byte_budget < settings.min_budget:
            self._fall_back(node, now + max(life_s, settings.backoff_max_s))
            node.wanted.update(topics)
            return
        node.failures = 0
        self._serial += 1
        grant = DataGrant(
            node_id=node_id,
            topics=topics,
            token=response.grant,
            byte_budget=max(response.byte_budget, 1),
            host=response.host,
            port=response.direct_port,
            usable_at=now + throttle_s,
            renew_at=born + life_s * settings.renew_fraction,
            usable_until=usable_until,
            serial=self._serial,
        )
        self.granted += 1
        self.renewed += node.granted > 0
        node.granted += 1
        current = self._current(node, now)
        if current is None:
            node.current, node.spent = grant, 0
        else:
            if not current.topics.issuperset(topics):
                self._switch(node, grant)  # it covers a topic the current one does not
            else:
                node.next = grant  # taken once the current one is spent
        if not grant.topics.issuperset(node.wanted):
            self._ask(node_id, node, now)
        else:
            node.wanted = set()

    def _disable_all(self, now: float) -> None:
        for node in self._nodes.values():
            node.current = node.next = None
        self._disabled_until = now + self._settings.fallback_s

    def _fall_back(self, node: _Node, until: float) -> None:
        if node.current is not None:
            node.wanted.update(node.current.topics)
        node.current = node.next = None
        node.gateway_until = until

    def _failed(self, node: _Node, now: float) -> None:
        """A failed call: no new ask for retry.backoff.ms doubling up to its maximum; the
        gateway meanwhile unless a current grant still serves."""
        settings = self._settings
        node.failures += 1
        backoff = min(settings.backoff_s * 2 ** min(node.failures - 1, 20), settings.backoff_max_s)
        node.ask_after = now + backoff
        if self._current(node, now) is None:
            node.gateway_until = now + backoff


def gateway_asker(
    conn: GatewayConnection, operation: gateway_pb2.DataAccessOperation, timeout_s: float
) -> Asker:
    """GrantDataAccess through `conn` (a gRPC future): failover on a dead gateway, and the
    answer's throttle time recorded with the gateway's other throttles (the client pauses as
    after a throttled fetch or produce)."""

    def ask(node_id: int, topics: frozenset[str]) -> GrantFuture:
        request = gateway_pb2.GrantDataAccessRequest(
            operation=operation, topics=sorted(topics), node_id=node_id
        )
        stub, index = conn.stub()
        future: GrantFuture = stub.GrantDataAccess.future(
            request, timeout=timeout_s, metadata=conn.metadata
        )

        def done(f: Any) -> None:
            try:
                response = f.result()
            except grpc.RpcError as error:
                if GatewayConnection.should_failover(error):
                    conn.failover(index)
                return
            except Exception:  # cancelled at close
                return
            conn.throttle.record(index, response.throttle_time_ms)

        future.add_done_callback(done)
        return future

    return ask
