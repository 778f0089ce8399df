"""The producer's direct path (decision 0047): produce frames to each partition leader's direct
port under a WRITE grant from the gateway, instead of through the gateway.

`DirectRoutes` decides, per partition, where its next request goes: the leader's node id (a
grant covers the topic there and its connection is ready), `GATEWAY` (no direct access in this
cluster: DELEGATION_TOKEN_AUTH_DISABLED, a refusal, no direct port, a connection refused; the
metadata is stale; the leader is unknown), or `WAIT` (a grant or its connection is on its way,
or the grant's throttle time has not passed: the partition is muted for a moment). The grants
are the shared `GrantKeeper`'s (`client/_grants.py`: never blocking, its answers wake the
sender): asked per node with every topic the producer has sent to there (a new topic asks
again), the next one asked once three quarters of the current one's lifetime or byte budget are
used and taken once the current one is spent or near its expiry; a topic refused uses the
gateway alone; a grant below max.request.size (a quota capped it) means the gateway for that
node. A new grant goes on the same connection (a grant frame) once the frames sent under the old
one were answered; a DELEGATION_TOKEN_EXPIRED answer marks the grant it was sent under spent
(the sender puts the refused batches back: a renewal is not a delivery failure). A fallback to
the gateway is asked about again after metadata.max.age.ms (retry.backoff.max.ms for a failed
call). Connections are this module's.

Runs on the sender thread only (the grant futures' callbacks only wake it). Every answer, or a
connection's failure, reaches the sender through `complete(inflight, outcome)`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import FRAME_CHARGE_BYTES
from riverlog.common.zerocopy import (
    KIND_GRANT,
    ProduceFramePart,
    encode_frame,
    produce_frame_pieces,
)
from riverlog.v1 import data_pb2

from .._connection import GatewayConnection
from .._grants import PENDING, WRITE, DataGrant, GrantKeeper, GrantSettings, gateway_asker
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
_EXPIRY_SLACK_S: Final = 1.0  # a grant is not used this close to its expiry
_EXPIRED: Final = int(ErrorCode.DELEGATION_TOKEN_EXPIRED)
_MIN_BUDGET_FRAMES: Final = 4
"""A grant paying for fewer of the largest frames is not used: the gateway instead."""


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
    """One node's direct connection (its grants are the keeper's)."""

    node_id: int
    host: str = ""
    port: int = 0
    conn: DirectConnection | None = None
    confirmed: bool = False  # the node took a grant frame on `conn`
    connected_at: float = 0.0
    serial: int = 0  # the grant last sent on `conn`
    grant_frames: deque[int] = field(default_factory=deque)  # serials of unanswered grant frames
    waiting: dict[int, Any] = field(default_factory=dict)  # correlation id -> InFlight
    serials: dict[int, int] = field(default_factory=dict)  # correlation id -> its grant
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
        self._metadata = metadata
        self._wakeup = wakeup
        self._complete = complete
        self._clock = clock
        self._timeout_s = config.request_timeout_ms / 1000
        self._fallback_s = config.metadata_max_age_ms / 1000
        # The most a frame costs the node's budget (decision 0047): its length plus
        # FRAME_CHARGE_BYTES. The node refuses a frame costing more than the budget left. A
        # frame's batches are at most max.request.size, or one batch of up to batch.size (a
        # drain always takes a first batch).
        largest = max(config.max_request_size, config.batch_size)
        self._max_cost = largest + _FRAME_SLACK + FRAME_CHARGE_BYTES
        self._nodes: dict[int, _Node] = {}
        self.keeper = GrantKeeper(
            gateway_asker(conn, WRITE, self._timeout_s),
            GrantSettings(
                renew_fraction=_RENEW_AT,
                expiry_slack_s=_EXPIRY_SLACK_S,
                # A budget below a few largest frames: the gateway capped it at one quota
                # sample's worth (a client under a byte-rate quota). The node refuses a frame
                # costing more than the budget left, so a grant counts as spent with one
                # largest frame left and is renewed with two left: a budget of one or two
                # frames would be used about half, each renewal charged in full. The
                # gateway's exact per-request accounting serves instead, until the grant
                # would have expired.
                min_budget=_MIN_BUDGET_FRAMES * self._max_cost,
                reserve_bytes=self._max_cost,
                fallback_s=self._fallback_s,
                backoff_s=max(config.retry_backoff_ms, 1) / 1000,
                backoff_max_s=config.retry_backoff_max_ms / 1000,
                collect_in_lookup=False,  # `poll`: one answer for a whole drain
            ),
            on_ready=wakeup.set,
            clock=clock,
        )
        self._refreshing: set[str] = set()
        # partitions a direct answer refused (TOPIC_AUTHORIZATION_FAILED): their next
        # request goes through the gateway, whose answer is authoritative
        self._gateway_next: set[tuple[str, int]] = set()
        self._refreshed_at: dict[str, float] = {}  # no refresh of a topic before then
        self._backoff_s = config.retry_backoff_ms / 1000
        self.next_check = float("inf")
        # the SDK's own counts (Producer.metrics): proof of the path taken, in tests too
        self.requests = 0

    @property
    def grants(self) -> int:
        return self.keeper.granted

    @property
    def renewals(self) -> int:
        return self.keeper.renewed

    # ---- routing ----------------------------------------------------------------------

    def route(self, topic: str, partition: int, now: float) -> int:
        """Where `topic`-`partition`'s next request goes: a node id, GATEWAY or WAIT."""
        if self._gateway_next and (topic, partition) in self._gateway_next:
            return GATEWAY
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
        grant = self.keeper.lookup(leader, (topic,), now)
        if grant is None:
            return GATEWAY
        if grant is PENDING:
            return WAIT  # the grant's answer wakes the sender
        assert isinstance(grant, DataGrant)
        if now < grant.usable_at:  # the quota's throttle time
            self.next_check = min(self.next_check, grant.usable_at)
            return WAIT
        node = self._nodes.get(leader)
        if node is None:
            node = self._nodes[leader] = _Node(leader)
        if node.conn is not None and (node.host, node.port) != (grant.host, grant.port):
            node.conn.fail(RiverlogError("the node moved", ErrorCode.NETWORK_EXCEPTION))
        if node.conn is None:
            if not self._connect(node, grant, now):
                return GATEWAY
        elif node.serial != grant.serial:
            if node.serials:
                # The frames sent under the old grant are answered first (a bubble once per
                # grant): one the node refused (66: another connection spent the grant) goes
                # back to its queue before any frame under the new grant is sent.
                return WAIT
            self._send_grant(node, grant)
        return leader if node.confirmed else WAIT

    def via_gateway(self, tp: tuple[str, int]) -> None:
        """A direct answer refused `tp` (TOPIC_AUTHORIZATION_FAILED: a grant frame refused
        and the topic only the new grant covers, or a revoked ACL): its next request goes
        through the gateway, which decides. The partition's direct frames were answered
        before that request is sent (one route per partition while requests are in flight)."""
        self._gateway_next.add(tp)

    def sent_via_gateway(self, tps: Iterable[tuple[str, int]]) -> None:
        """Requests for `tps` went through the gateway: later ones may go direct again."""
        if self._gateway_next:
            self._gateway_next.difference_update(tps)

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
        node.serials[correlation_id] = node.serial
        self.requests += 1
        conn.send(pieces)
        # The node charges each frame its size plus FRAME_CHARGE_BYTES before taking it, and
        # refuses a frame costing more than the budget left: counting the same (and the 4-byte
        # headers), the keeper takes the next grant while the budget left still pays for the
        # largest frame (`reserve_bytes`), so no frame goes out that the node would refuse. A
        # refused frame would be sent again after later ones, out of order for a producer
        # without idempotence.
        self.keeper.spend(node_id, node.serial, sum(map(len, pieces)) + FRAME_CHARGE_BYTES)

    def renew(self, node_id: int) -> None:
        """The node answered DELEGATION_TOKEN_EXPIRED: the grant the frame was sent under was
        marked spent as the answer was read (`_answer`); the next route takes the next one."""

    # ---- the sender's turn ------------------------------------------------------------

    def poll(self, now: float) -> None:
        """End connections to nodes that fell back to the gateway, and those on which a
        request waited past request.timeout.ms; take the grants that arrived."""
        self.next_check = float("inf")
        self.keeper.collect(now)
        for node in list(self._nodes.values()):
            direct = self.keeper.direct(node.node_id, now)
            if node.conn is not None and not direct and not node.waiting:
                node.conn.fail(RiverlogError("gateway fallback", ErrorCode.NETWORK_EXCEPTION))
            if node.conn is not None and node.conn.connecting:
                connect_by = node.connected_at + min(self._timeout_s, CONNECT_TIMEOUT_S)
                if now >= connect_by:  # a failed connect: the gateway, as a refused one
                    node.conn.give_up()
                else:
                    self.next_check = min(self.next_check, connect_by)
            elif node.conn is not None and not node.confirmed:
                if now - node.connected_at > self._timeout_s:  # no answer to the grant frame
                    self._fall_back(node, "no answer to the grant")
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
        self.keeper.close()
        for node in self._nodes.values():
            if node.conn is not None:
                node.conn.fail(RiverlogError("the producer closed", ErrorCode.NETWORK_EXCEPTION))

    # ---- connections -----------------------------------------------------------------

    def _connect(self, node: _Node, grant: DataGrant, now: float) -> bool:
        """Start connecting (non-blocking: `route` answers WAIT until the grant frame queued
        here was answered); False when the connect failed at once (the gateway then)."""
        try:
            node.conn = DirectConnection(
                grant.host,
                grant.port,
                self._wakeup,
                lambda payload, is_grant: self._answer(node, payload, is_grant),
                lambda error: self._closed(node, error),
            )
        except RiverlogError as e:
            self._fall_back(node, str(e))
            return False
        node.host, node.port = grant.host, grant.port
        node.confirmed, node.connected_at = False, now
        node.grant_frames.clear()
        self._send_grant(node, grant)
        return True

    def _send_grant(self, node: _Node, grant: DataGrant) -> None:
        assert node.conn is not None
        node.conn.send([encode_frame(grant.token, KIND_GRANT)])
        node.serial = grant.serial
        node.grant_frames.append(grant.serial)

    def _fall_back(self, node: _Node, why: str) -> None:
        """Use the gateway for this node until metadata.max.age.ms has passed."""
        log.info("node %d: produce via the gateway for %.0f s (%s)", node.node_id,
                 self._fallback_s, why)  # fmt: skip
        self.keeper.unreachable(node.node_id)
        conn = node.conn
        if conn is not None and not node.waiting:  # else closed once they are answered
            node.conn = None  # (so its close does not fall back once more)
            conn.fail(RiverlogError(why, ErrorCode.NETWORK_EXCEPTION))

    # ---- answers ----------------------------------------------------------------------

    def _answer(self, node: _Node, payload: memoryview, is_grant: bool) -> None:
        if is_grant:
            answer = data_pb2.DataGrantResponse.FromString(bytes(payload))
            serial = node.grant_frames.popleft() if node.grant_frames else node.serial
            code = int(answer.error_code)
            if code == ErrorCode.NONE:
                node.confirmed = True
            elif code == ErrorCode.DELEGATION_TOKEN_EXPIRED:
                # nothing spent under it: refused fresh (clock skew), the keeper sends the
                # node to the gateway instead of asking again forever
                self.keeper.expired(node.node_id, serial, grant_frame=True)
            else:
                self._fall_back(node, f"grant refused: {answer.error_message}")
            return
        response = data_pb2.ProduceResponse.FromString(bytes(payload))
        inflight = node.waiting.pop(response.correlation_id, None)
        serial = node.serials.pop(response.correlation_id, node.serial)
        if inflight is None:
            log.warning("node %d answered an unknown request", node.node_id)
            return
        if any(p.error_code == _EXPIRED for p in response.partitions):
            self.keeper.expired(node.node_id, serial)  # the sender puts the batches back
        self._complete(inflight, Outcome(response))

    def _closed(self, node: _Node, error: RiverlogError) -> None:
        unreachable = node.conn is not None and node.conn.unreachable
        node.conn, node.confirmed, node.serial = None, False, 0
        node.serials.clear()
        waiting, node.waiting = node.waiting, {}
        for inflight in waiting.values():
            self._complete(inflight, Outcome(None, RiverlogError(error.message, error.code)))
        if unreachable:  # refused, no route, timed out: the gateway, as a refused connect
            self._fall_back(node, error.message)

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
