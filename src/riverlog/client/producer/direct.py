"""The producer's direct path (decision 0047): produce frames to each partition leader's direct
port under a WRITE grant from the gateway, instead of through the gateway.

`DirectRoutes` decides, per partition, where its next request goes: the leader's node id (a
grant covers the topic there and its connection is ready), `GATEWAY` (no direct access in this
cluster: DELEGATION_TOKEN_AUTH_DISABLED, a refusal, no direct port, a connection refused; the
metadata is stale; the leader is unknown), or `WAIT` (a grant or its connection is on its way:
the partition is muted for a moment). Grants are asked per node with every topic the producer
has sent to there (a new topic asks again), with `GrantDataAccess.future` so the sender thread
never blocks on the gateway: its answer wakes the sender. A grant is renewed on the same
connection (a grant frame, pipelined with the produce frames) when three quarters of its
lifetime or byte budget are used, and at once when the node answers DELEGATION_TOKEN_EXPIRED (the
sender puts the refused batches back: a renewal is not a delivery failure). A fallback to the
gateway is asked about again after metadata.max.age.ms (retry.backoff.max.ms for a failed
call).

Runs on the sender thread only (the grant futures' callbacks only wake it). Every answer, or a
connection's failure, reaches the sender through `complete(inflight, outcome)`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.grants import FRAME_CHARGE_BYTES
from riverlog.common.zerocopy import (
    FRAME_HEADER,
    KIND_GRANT,
    ProduceFramePart,
    produce_frame_pieces,
)
from riverlog.v1 import data_pb2, gateway_pb2

from .._connection import GatewayConnection
from .._metadata import INVALIDATED, MetadataCache
from ..config import ProducerConfig
from .direct_io import DirectConnection, Wakeup

log = logging.getLogger(__name__)

GATEWAY: Final = -1
WAIT: Final = -2
_RENEW_AT: Final = 0.75  # of a grant's lifetime or byte budget
_FRAME_SLACK: Final = 4096
"""A produce frame's bytes beyond its batches' (max.request.size or batch.size bounds those):
the header, topic names, per-partition fields. A frame beyond it may be refused
DELEGATION_TOKEN_EXPIRED by the node: its batches are put back and sent after the renewal, as
for any such answer."""
CONNECT_TIMEOUT_S: Final = 5.0
"""A direct connect still in progress after this (or request.timeout.ms, if shorter) is given
up: the node's partitions go through the gateway, as after a refused connect."""


class Outcome:
    """A direct request's outcome, as a done future: `result()` returns the answer or raises."""

    __slots__ = ("_error", "_response")

    def __init__(
        self, response: data_pb2.ProduceResponse | None, error: BaseException | None = None
    ) -> None:
        self._response = response
        self._error = error

    def result(self) -> data_pb2.ProduceResponse:
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


@dataclass(eq=False)
class _Node:
    node_id: int
    grant: bytes = b""
    topics: frozenset[str] = frozenset()
    expires_at_ms: int = 0
    renew_at_ms: int = 0
    budget: int = 0
    spent: int = 0
    usable_at: float = 0.0  # the grant's throttle_time_ms
    host: str = ""
    port: int = 0
    pending: Any = None  # the GrantDataAccess future on its way
    pending_topics: frozenset[str] = frozenset()
    pending_server: int = 0
    wanted: set[str] = field(default_factory=set)  # topics to ask for next
    conn: DirectConnection | None = None
    confirmed: bool = False  # the node took a grant frame on `conn`
    connected_at: float = 0.0
    stale: bool = False  # answered DELEGATION_TOKEN_EXPIRED: no frame until renewed
    gateway_until: float = 0.0
    refused: dict[str, float] = field(default_factory=dict)  # topic -> gateway until
    waiting: dict[int, Any] = field(default_factory=dict)  # correlation id -> InFlight
    next_id: int = 1


class DirectRoutes:
    """Lifecycle: built by the sender when the direct path is on; `route`, `send`, `poll` and
    `renew` from the sender loop; `close` when it ends (requests still waiting fail)."""

    def __init__(
        self,
        config: ProducerConfig,
        conn: GatewayConnection,
        metadata: MetadataCache,
        wakeup: Wakeup,
        complete: Callable[[Any, Outcome], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._conn = conn
        self._metadata = metadata
        self._wakeup = wakeup
        self._complete = complete
        self._clock = clock
        self._timeout_s = config.request_timeout_ms / 1000
        self._fallback_s = config.metadata_max_age_ms / 1000
        self._retry_s = config.retry_backoff_max_ms / 1000
        self._max_request = config.max_request_size
        # The most a frame costs the node's budget (decision 0047): its length plus
        # FRAME_CHARGE_BYTES. The node refuses a frame costing more than the budget left. A
        # frame's batches are at most max.request.size, or one batch of up to batch.size (a
        # drain always takes a first batch).
        largest = max(config.max_request_size, config.batch_size)
        self._max_cost = largest + _FRAME_SLACK + FRAME_CHARGE_BYTES
        self._nodes: dict[int, _Node] = {}
        self._refreshing: set[str] = set()
        self._refreshed_at: dict[str, float] = {}  # no refresh of a topic before then
        self._backoff_s = config.retry_backoff_ms / 1000
        self.next_check = float("inf")
        # the SDK's own counts (Producer.metrics): proof of the path taken, in tests too
        self.requests = 0
        self.grants = 0
        self.renewals = 0

    # ---- routing ----------------------------------------------------------------------

    def route(self, topic: str, partition: int, now: float) -> int:
        """Where `topic`-`partition`'s next request goes: a node id, GATEWAY or WAIT."""
        info = self._metadata.topics.get(topic)
        if info is None or info.expires_at < now:
            self._refresh(topic)
            # Only aged (metadata.max.age.ms): the known leader meanwhile. Unknown, or
            # invalidated by a leadership error: the gateway routes by its own image.
            if info is None or info.expires_at == INVALIDATED:
                return GATEWAY
        if not 0 <= partition < len(info.leaders) or info.leaders[partition] < 0:
            return GATEWAY
        leader = info.leaders[partition]
        node = self._nodes.get(leader)
        if node is None:
            node = self._nodes[leader] = _Node(leader)
        if now < node.gateway_until or node.refused.get(topic, 0.0) > now:
            return GATEWAY
        if topic not in node.topics:
            self._ask(node, topic)
            return GATEWAY if now < node.gateway_until else WAIT
        if node.stale or not node.grant or now < node.usable_at:
            if now < node.usable_at:
                self.next_check = min(self.next_check, node.usable_at)
            return WAIT
        if node.conn is None and not self._connect(node, now):
            return GATEWAY
        return leader if node.confirmed else WAIT

    def in_flight(self, node_id: int) -> int:
        node = self._nodes.get(node_id)
        return 0 if node is None else len(node.waiting)

    def send(
        self,
        node_id: int,
        inflight: Any,
        acks: int,
        timeout_ms: int,
        parts: list[ProduceFramePart],
    ) -> None:
        """Send one produce frame to `node_id` (routed there this turn); its answer, or the
        connection's failure, comes back through `complete`. Raises RiverlogError
        (MESSAGE_TOO_LARGE) for a frame over 16 MiB, before anything is sent."""
        node = self._nodes[node_id]
        conn = node.conn
        correlation_id = node.next_id
        pieces = produce_frame_pieces(acks, timeout_ms, "", correlation_id, parts)
        if conn is None or conn.closed:  # routed this turn, so not expected: fails as a close
            error = RiverlogError("the direct connection closed", ErrorCode.NETWORK_EXCEPTION)
            self._complete(inflight, Outcome(None, error))
            return
        node.next_id += 1
        node.waiting[correlation_id] = inflight
        node.spent += sum(map(len, pieces)) + FRAME_CHARGE_BYTES
        self.requests += 1
        conn.send(pieces)
        if node.budget - node.spent < self._max_cost:
            # The node charges each frame its size plus FRAME_CHARGE_BYTES before taking it,
            # and refuses a frame costing more than the budget left: counting the same (and
            # the 4-byte headers), renewing while the budget left still pays for the largest
            # frame, no frame goes out that the node would refuse. A refused frame would be
            # sent again after later ones, out of order for a producer without idempotence.
            self.renew(node_id)
        elif node.spent >= node.budget * _RENEW_AT and node.pending is None:
            self._ask(node, None)

    def renew(self, node_id: int) -> None:
        """The node answered DELEGATION_TOKEN_EXPIRED: no frame goes there until a new grant
        was sent."""
        node = self._nodes.get(node_id)
        if node is not None and not node.stale:
            node.stale = True
            if node.pending is None:
                self._ask(node, None)

    # ---- the sender's turn ------------------------------------------------------------

    def poll(self, now: float) -> None:
        """Take the grants that arrived, renew those due, and end connections on which a
        request waited past request.timeout.ms."""
        self.next_check = float("inf")
        now_ms = time.time_ns() // 1_000_000
        for node in list(self._nodes.values()):
            pending = node.pending
            if pending is not None and pending.done():
                node.pending = None
                self._granted(node, pending, now)
            elif pending is None and node.grant:
                if now_ms >= node.expires_at_ms:
                    node.stale = True
                if now_ms >= node.renew_at_ms or node.stale:
                    self._ask(node, None)
            if node.conn is not None and not node.grant and not node.waiting:
                node.conn.fail(RiverlogError("gateway fallback", ErrorCode.NETWORK_EXCEPTION))
            if node.conn is not None and node.conn.connecting:
                connect_by = node.connected_at + min(self._timeout_s, CONNECT_TIMEOUT_S)
                if now >= connect_by:  # a failed connect: the gateway, as a refused one
                    node.conn.give_up()
                else:
                    self.next_check = min(self.next_check, connect_by)
            elif node.conn is not None and not node.confirmed:
                if now - node.connected_at > self._timeout_s:  # no answer to the grant frame
                    self._fall_back(node, now, "no answer to the grant", True)
            elif node.waiting and node.conn is not None:
                oldest = next(iter(node.waiting.values()))
                if now - oldest.sent_at > self._timeout_s:
                    node.conn.fail(
                        RiverlogError(
                            f"no answer from {node.conn.address} within request.timeout.ms",
                            ErrorCode.REQUEST_TIMED_OUT,
                        )
                    )

    def close(self) -> None:
        for node in self._nodes.values():
            if node.pending is not None:
                node.pending.cancel()
            if node.conn is not None:
                node.conn.fail(RiverlogError("the producer closed", ErrorCode.NETWORK_EXCEPTION))

    # ---- grants -----------------------------------------------------------------------

    def _ask(self, node: _Node, topic: str | None) -> None:
        """Ask for a grant covering the node's topics (and `topic`), unless one is on its way
        (then `topic` is asked for next)."""
        if topic is not None:
            node.wanted.add(topic)
        if node.pending is not None:
            return
        topics = node.topics | node.wanted
        node.wanted = set()
        request = gateway_pb2.GrantDataAccessRequest(
            operation=gateway_pb2.DATA_ACCESS_WRITE, topics=sorted(topics), node_id=node.node_id
        )
        try:
            stub, server = self._conn.stub()
            future = stub.GrantDataAccess.future(
                request, timeout=self._timeout_s, metadata=self._conn.metadata
            )
        except Exception as e:  # a closed client
            log.debug("GrantDataAccess for node %d not sent: %s", node.node_id, e)
            node.gateway_until = self._clock() + self._retry_s
            return
        node.pending, node.pending_topics, node.pending_server = future, topics, server
        future.add_done_callback(lambda _: self._wakeup.set())

    def _granted(self, node: _Node, future: Any, now: float) -> None:
        topics = node.pending_topics
        try:
            response: gateway_pb2.GrantDataAccessResponse = future.result()
        except grpc.RpcError as e:
            if GatewayConnection.should_failover(e):
                self._conn.failover(node.pending_server)
            unimplemented = e.code() == grpc.StatusCode.UNIMPLEMENTED  # an older gateway
            self._fall_back(node, now, f"GrantDataAccess failed: {e.code()}", not unimplemented)
            return
        except Exception as e:  # cancelled at close
            self._fall_back(node, now, f"GrantDataAccess failed: {e}", True)
            return
        code = int(response.error_code)
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            # The gateway path reports the refusal per partition, as it always did; topics
            # granted before keep their grant.
            refused = (topics - node.topics) or topics
            for topic in refused:
                node.refused[topic] = now + self._fallback_s
            if refused == topics:
                node.topics = node.topics - refused
            if node.wanted:
                self._ask(node, None)
            return
        if code != ErrorCode.NONE or not response.direct_port:
            why = (
                "the node has no direct port"
                if code == ErrorCode.NONE
                else str(error_for(code, response.error_message))
            )
            for_good = code in (ErrorCode.NONE, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
            self._fall_back(node, now, why, not for_good)
            return
        # The quota's throttle (Kafka's produce-throttle-time): the sender sends nothing until
        # it has passed, as after a throttled produce answer.
        self._conn.throttle.record(node.pending_server, response.throttle_time_ms)
        now_ms = time.time_ns() // 1_000_000
        if response.byte_budget < self._max_cost:
            # A budget smaller than one request: the gateway capped it at one quota sample's
            # worth (a throttled client), and the node refuses a frame costing more than the
            # budget left: the gateway's per-request accounting serves instead, until the
            # grant would have expired.
            lifetime_s = max((response.expires_at_ms - now_ms) / 1000, self._retry_s)
            why = f"a grant of {response.byte_budget} bytes (a quota) is below max.request.size"
            self._fall_back(node, now, why, False, lifetime_s)
            node.wanted.update(topics)
            return
        if node.conn is not None and (node.host, node.port) != (
            response.host,
            response.direct_port,
        ):
            node.conn.fail(RiverlogError("the node moved", ErrorCode.NETWORK_EXCEPTION))
        node.host, node.port = response.host, response.direct_port
        renewal = bool(node.grant)
        node.grant = response.grant
        node.topics = topics
        node.expires_at_ms = response.expires_at_ms
        node.renew_at_ms = now_ms + int((response.expires_at_ms - now_ms) * _RENEW_AT)
        node.budget, node.spent = response.byte_budget, 0
        node.usable_at = now + response.throttle_time_ms / 1000
        node.stale = False
        self.grants += 1
        self.renewals += renewal
        if node.conn is not None:
            self._send_grant(node)  # pipelined with the frames: the node takes it in order
        if node.wanted:
            self._ask(node, None)

    def _connect(self, node: _Node, now: float) -> bool:
        """Start connecting (non-blocking: `route` answers WAIT until the grant frame queued
        here was answered); False when the connect failed at once (the gateway then)."""
        try:
            node.conn = DirectConnection(
                node.host,
                node.port,
                self._wakeup,
                lambda payload, is_grant: self._answer(node, payload, is_grant),
                lambda error: self._closed(node, error),
            )
        except RiverlogError as e:
            self._fall_back(node, now, str(e), False)
            return False
        node.confirmed, node.connected_at = False, now
        self._send_grant(node)
        return True

    def _send_grant(self, node: _Node) -> None:
        assert node.conn is not None
        grant = node.grant
        node.conn.send([FRAME_HEADER.pack(KIND_GRANT << 24 | len(grant)), grant])

    def _fall_back(
        self, node: _Node, now: float, why: str, brief: bool, until: float | None = None
    ) -> None:
        """Use the gateway for this node: for retry.backoff.max.ms after a failed call, else
        until metadata.max.age.ms (or `until` seconds) has passed."""
        if until is None:
            until = self._retry_s if brief else self._fallback_s
        log.info("node %d: produce via the gateway for %.0f s (%s)", node.node_id, until, why)
        node.gateway_until = now + until
        node.wanted.update(node.topics)
        node.grant, node.topics, node.stale = b"", frozenset(), False
        conn = node.conn
        if conn is not None and not node.waiting:  # else closed once they are answered
            node.conn = None  # (so its close does not fall back once more)
            conn.fail(RiverlogError(why, ErrorCode.NETWORK_EXCEPTION))

    # ---- answers ----------------------------------------------------------------------

    def _answer(self, node: _Node, payload: memoryview, is_grant: bool) -> None:
        if is_grant:
            answer = data_pb2.DataGrantResponse.FromString(bytes(payload))
            code = int(answer.error_code)
            if code == ErrorCode.NONE:
                node.confirmed = True
            elif code == ErrorCode.DELEGATION_TOKEN_EXPIRED:
                self.renew(node.node_id)
            else:
                why = f"grant refused: {answer.error_message}"
                self._fall_back(node, self._clock(), why, False)
            return
        response = data_pb2.ProduceResponse.FromString(bytes(payload))
        inflight = node.waiting.pop(response.correlation_id, None)
        if inflight is None:
            log.warning("node %d answered an unknown request", node.node_id)
            return
        self._complete(inflight, Outcome(response))

    def _closed(self, node: _Node, error: RiverlogError) -> None:
        unreachable = node.conn is not None and node.conn.unreachable
        node.conn, node.confirmed = None, False
        waiting, node.waiting = node.waiting, {}
        for inflight in waiting.values():
            self._complete(inflight, Outcome(None, RiverlogError(error.message, error.code)))
        if unreachable:  # refused, no route, timed out: the gateway, as a refused connect
            self._fall_back(node, self._clock(), error.message, False)

    def _refresh(self, topic: str) -> None:
        now = self._clock()
        if topic in self._refreshing or now < self._refreshed_at.get(topic, 0.0):
            return
        self._refreshing.add(topic)
        self._refreshed_at[topic] = now + self._backoff_s

        def done() -> None:
            self._refreshing.discard(topic)
            self._wakeup.set()

        self._metadata.refresh_async([topic], done)


class RoutingFilter:
    """The partitions a drain skips on the direct path: those the sender mutes anyway
    (`muted`), those whose route must wait (WAIT), is at max.in.flight.requests.per.connection,
    or differs from the route of the partition's requests in flight (a partition's requests
    keep one connection, hence their order, until they are answered). Remembers the route of
    each partition it let through (`routes`), which the sender then uses."""

    __slots__ = ("_counts", "_current", "_direct", "_limit", "_muted", "_now", "routes")

    def __init__(
        self,
        muted: Container[tuple[str, int]],
        direct: DirectRoutes,
        counts: dict[int, int],
        current: dict[tuple[str, int], list[int]],
        limit: int,
        now: float,
    ) -> None:
        self._muted = muted
        self._direct = direct
        self._counts = counts
        self._current = current
        self._limit = limit
        self._now = now
        self.routes: dict[tuple[str, int], int] = {}

    def __contains__(self, key: object) -> bool:
        if key in self._muted:
            return True
        tp: tuple[str, int] = key  # type: ignore[assignment]
        route = self.routes.get(tp)
        if route is None:
            route = self.routes[tp] = self._direct.route(tp[0], tp[1], self._now)
        if route == WAIT or self._counts.get(route, 0) >= self._limit:
            return True
        current = self._current.get(tp)
        return current is not None and current[0] != route
