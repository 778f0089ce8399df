"""The producer's background thread: drains ready batches into produce requests, keeps up to
max.in.flight.requests.per.connection of them in flight as gRPC futures, and settles each
batch: acknowledged, retried after a back-off, or failed.

One thread does all of it, with no thread per request: `stub.Produce.future` returns at once,
its done-callback (on a gRPC thread) only queues the outcome and wakes this thread. A request
carries the ready batches of several partitions (all of a partition's ready batches back to
back, their offsets following the base offset the leader answers), up to max.request.size.
Retriable errors (the catalog's `retriable`) put the batch back at the front of its partition
after retry.backoff.ms, doubling up to retry.backoff.max.ms, until `retries` or
delivery.timeout.ms run out; errors that say the metadata changed also invalidate the topic's
cached metadata. User callbacks run on this thread, as Kafka's do on its I/O thread.
Requests go on the gateway's ProduceStream, which keeps their order; one that must go as a
unary call of its own (acks=0, a traced one) keeps a non-idempotent partition's order by
being the partition's only request in flight (with tracing on, so is every request of a
non-idempotent producer: a traced one must not overtake a streamed one either).
"""

from __future__ import annotations

import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable, Container
from typing import Any

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.rpc.convert import acks_to_proto
from riverlog.common.types import Acks
from riverlog.common.zerocopy import ProduceFramePart
from riverlog.v1 import common_pb2, data_pb2, transactions_pb2

from .._connection import GatewayConnection, rpc_error
from .._metadata import MetadataCache
from .._produce_request import EncodedProduceRequest
from ..config import ProducerConfig
from ..errors import ClientClosedError, ClientTimeoutError
from .accumulator import RecordAccumulator
from .batch import ProducerBatch
from .direct import GATEWAY, DirectRoutes, Outcome, RoutingFilter
from .direct_io import Wakeup
from .idempotence import IdempotenceManager, leaves_outcome_unknown
from .transaction_manager import TransactionManager
from .txn_decisions import DrainAction, TopicPartitionKey

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.5  # the longest the loop sleeps without a wake-up
_EXPIRY_CHECK_S = 0.05  # delivery.timeout.ms is enforced this precisely


class _OnlyAllowed:
    """The partitions a transactional drain skips: the muted ones and any not in `allowed`."""

    __slots__ = ("allowed", "muted")

    def __init__(self, muted: Container[TopicPartitionKey], allowed: frozenset[TopicPartitionKey]):
        self.muted = muted
        self.allowed = allowed

    def __contains__(self, key: object) -> bool:
        return key in self.muted or key not in self.allowed


class InFlight:
    """One produce request awaiting its answer: its batches grouped by partition, in order.
    `route`: GATEWAY, or the node id of the leader it went to directly (decision 0047)."""

    __slots__ = ("groups", "muting", "route", "sent_at", "server", "span", "tps")

    def __init__(
        self,
        groups: dict[tuple[str, int], list[ProducerBatch]],
        server: int,
        span: Any,
        sent_at: float,
    ) -> None:
        self.groups = groups
        self.server = server
        self.span = span
        self.sent_at = sent_at
        self.tps = frozenset(groups)
        self.muting = False  # its partitions wait for its answer before the next request
        self.route = GATEWAY


class Sender(threading.Thread):
    """Lifecycle: `start()`; `wakeup()` from any thread when there may be work; `initiate_close()`
    to finish every pending batch and stop; `force_close(error)` to stop at once, failing what
    is left. Only this thread touches the in-flight table and settles batches (except a forced
    close, which settles leftovers after the thread stopped)."""

    def __init__(
        self,
        config: ProducerConfig,
        conn: GatewayConnection,
        metadata: MetadataCache,
        wakeup_event: threading.Event | Wakeup,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=f"riverlog-producer-sender[{conn.client_id}]", daemon=True)
        self._config = config
        self._conn = conn
        self._metadata = metadata
        self._event = wakeup_event
        self._clock = clock
        self._acks = acks_to_proto(Acks(config.acks))
        self._timeout_s = config.request_timeout_ms / 1000
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._guarantee_order = self._max_in_flight == 1
        # A request that goes as a unary call of its own (acks=0: a stream would answer
        # nothing; a traced request) has no order with the other calls in flight: gRPC
        # keeps none between calls, and the gateway handles each one in a task of its own
        # (retrying a stale route, say) while the next goes ahead. Without sequence numbers
        # (no idempotence) nothing puts them back in order, so such a request's partitions
        # stay muted until it is answered (for acks=0: once the leader took it), as Kafka's
        # one connection keeps a partition's requests in order.
        self._unary_one_at_a_time = not config.enable_idempotence
        # A unary request must not overtake a streamed one already in flight either. Whether a
        # request goes unary is known only once drained (a traced producer's batches have a
        # trace context, those of send_many do not, so its requests take either lane), so where
        # requests may take both lanes (tracing on, acks not 0) every request of such a
        # producer is its partitions' only one in flight.
        from .. import tracing

        self._mute_every_request = self._unary_one_at_a_time and tracing.enabled()
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._completions: queue.SimpleQueue[tuple[InFlight, grpc.Future]] = queue.SimpleQueue()
        self._in_flight: set[InFlight] = set()
        self._muted: set[tuple[str, int]] = set()
        self._running = True
        self._forced = False
        self._next_expiry_check = 0.0
        self.accumulator: RecordAccumulator  # set by the producer before start()
        self.idempotence = (
            IdempotenceManager(self._on_sequence_trouble if config.transactional_id else None)
            if config.enable_idempotence
            else None
        )
        self.transactions: TransactionManager | None = None  # set by a transactional producer
        self._transactional_id = config.transactional_id
        self._next_init_attempt = 0.0
        # The direct path (decision 0047): requests to each leader's direct port, which the
        # producer turns on by handing a Wakeup (not for transactions, nor traced requests:
        # their span context rides on a gRPC call). In flight per route (GATEWAY or a node),
        # and per partition the route of its requests in flight and how many there are.
        self._direct: DirectRoutes | None = None
        if isinstance(wakeup_event, Wakeup) and not config.transactional_id:
            self._direct = DirectRoutes(
                config, conn, metadata, wakeup_event, self._on_direct_done, clock
            )
        self._route_counts: dict[int, int] = {}
        self._tp_routes: dict[tuple[str, int], list[int]] = {}

    @property
    def direct(self) -> DirectRoutes | None:
        return self._direct

    def wakeup(self) -> None:
        self._event.set()

    # ---- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        acc = self.accumulator
        while True:
            self._event.clear()
            now = self._clock()
            self._settle_completions(now)
            if self._forced or (not self._running and not acc.has_incomplete()):
                break
            direct = self._direct
            if direct is not None:
                direct.poll(now)
            if now >= self._next_expiry_check:  # a lock over every deque: not at every turn
                self._next_expiry_check = now + _EXPIRY_CHECK_S
                self._conn.expire()
                for batch in acc.expire(now):
                    self._expire(batch, now)
            next_check = now + _IDLE_WAIT_S
            throttled_s = self._conn.throttle_remaining_s()
            if throttled_s > 0:  # the gateway asked for a pause (quota): send it nothing
                next_check = min(next_check, now + throttled_s)
            txn = self.transactions
            if txn is None:
                ready = self.idempotence is None or self._ensure_producer_id(now)
                next_check = self._drain_and_send(now, next_check, ready and throttled_s <= 0)
            else:
                with txn.drain_lock:  # an end waits: no batch leaves with a stale epoch
                    next_check = self._drain_transactional(txn, now, next_check, throttled_s)
            if direct is not None:
                next_check = min(next_check, direct.next_check)
            elif len(self._in_flight) >= self._max_in_flight:
                next_check = now + _IDLE_WAIT_S  # a completion wakes us
            wait = min(next_check - now, _IDLE_WAIT_S)
            if wait > 0:
                self._event.wait(wait)
            elif direct is not None:
                self._event.wait(0)  # the direct sockets' answers, without sleeping
        if self._forced:
            for inflight in list(self._in_flight):
                for batches in inflight.groups.values():
                    for batch in batches:
                        self._fail(batch, ClientClosedError("producer", "closed before delivery"))
        if self._direct is not None:
            self._direct.close()
        if isinstance(self._event, Wakeup):
            self._event.close()

    def _drain_and_send(
        self,
        now: float,
        next_check: float,
        ready: bool,
        allowed: frozenset[tuple[str, int]] | None = None,
    ) -> float:
        """Drain and send ready batches while requests may go out; with `allowed` (the
        partitions in the transaction), only theirs. Returns when the next check is due."""
        acc = self.accumulator
        idem = self.idempotence
        direct = self._direct
        while ready and (direct is not None or len(self._in_flight) < self._max_in_flight):
            muted = self._muted if idem is None else self._muted | idem.blocked()
            skip: Container[tuple[str, int]] = (
                muted if allowed is None else _OnlyAllowed(muted, allowed)
            )
            routing = None
            if direct is not None:  # each route (gateway, node) has its own max.in.flight
                skip = routing = RoutingFilter(
                    skip, direct, self._route_counts, self._tp_routes, self._max_in_flight, now
                )
            batches, next_check = acc.drain(
                now,
                self._config.max_request_size,
                skip,
                None if idem is None else idem.capacity,
                min((f.sent_at for f in self._in_flight), default=math.inf),
            )
            if not batches:
                break
            self._send(batches, None if routing is None else routing.routes)
        return next_check

    def _drain_transactional(
        self, txn: TransactionManager, now: float, next_check: float, throttled_s: float
    ) -> float:
        """The transactional producer's turn: add new partitions to the transaction, then
        drain the others; or fail every queued batch (aborting, or the transaction failed)."""
        acc = self.accumulator
        queued = acc.queued_partitions() if acc.has_queued() else []
        action, added = txn.before_drain(queued, now)
        if action is DrainAction.DROP:
            error = txn.dropped_batch_error()
            for batch in acc.abort_queued():
                self._fail(batch, error)
            return next_check
        ready = self._ensure_producer_id(now) and action is DrainAction.SEND
        if ready and not added.issuperset(queued):  # an add to retry after its back-off
            next_check = min(next_check, now + self._config.retry_backoff_ms / 1000)
        # Only partitions already in the transaction: one that got its first batch since
        # `queued` was read waits for the next turn's AddPartitionsToTxn.
        return self._drain_and_send(now, next_check, ready and throttled_s <= 0, added)

    def _on_sequence_trouble(self, why: str) -> None:
        if self.transactions is not None:
            self.transactions.on_sequence_trouble(why)

    def initiate_close(self) -> None:
        """Send everything pending, then stop (the accumulator is already closed)."""
        self._running = False
        self._event.set()

    def force_close(self) -> None:
        """Stop without waiting for pending batches; they fail with ClientClosedError."""
        self._running = False
        self._forced = True
        self._event.set()

    # ---- sending ------------------------------------------------------------------------

    def _ensure_producer_id(self, now: float) -> bool:
        """Idempotence: apply a requested epoch bump, and have a producer id (InitProducerId
        at the first send, retried after retry.backoff.ms while it fails). Returns whether
        batches may be drained."""
        idem = self.idempotence
        assert idem is not None
        idem.before_drain()
        if idem.has_producer_id() or self.transactions is not None:
            return idem.has_producer_id()  # a transactional id's comes from init_transactions
        if now < self._next_init_attempt or not self.accumulator.has_queued():
            return False
        try:
            response = self._conn.call(
                lambda stub: stub.InitProducerId,
                transactions_pb2.InitProducerIdRequest(),
                self._timeout_s,
            )
        except Exception as e:
            log.warning("InitProducerId failed: %s", rpc_error(e))
            self._next_init_attempt = now + self._config.retry_backoff_ms / 1000
            return False
        idem.set_producer_id(response.producer_id, response.producer_epoch)
        return True

    def _send(
        self, batches: list[ProducerBatch], routes: dict[tuple[str, int], int] | None = None
    ) -> None:
        """Send the drained batches: to the gateway, or (`routes`: the direct path) one
        request per route."""
        groups: dict[tuple[str, int], list[ProducerBatch]] = {}
        idem = self.idempotence
        for batch in batches:
            if idem is not None:
                idem.assign(batch)
            if self._transactional_id:
                batch.transactional = True
            try:
                batch.pieces()
            except Exception as e:  # send() checks records, so this is a bug, not bad input
                log.exception("cannot encode %r", batch)
                if idem is not None:
                    idem.on_response(batch)
                self._fail(batch, RiverlogError(f"cannot encode: {e}", ErrorCode.INVALID_RECORD))
                continue
            groups.setdefault((batch.topic, batch.partition), []).append(batch)
        if not groups:
            return
        if routes is not None:
            by_route: dict[int, dict[tuple[str, int], list[ProducerBatch]]] = {}
            for tp, group in groups.items():
                by_route.setdefault(routes.get(tp, GATEWAY), {})[tp] = group
            for route, routed in by_route.items():
                if route == GATEWAY or not self._send_direct(route, routed):
                    self._send_gateway(routed)
            return
        self._send_gateway(groups)

    def _send_direct(self, node: int, groups: dict[tuple[str, int], list[ProducerBatch]]) -> bool:
        """One produce frame to `node`'s direct port (its batches as pieces, uncopied); False
        when it must take the gateway instead (a request over the frame's 16 MiB)."""
        assert self._direct is not None
        parts: list[ProduceFramePart] = [
            (t, p, [piece for b in group for piece in b.pieces()], None)
            for (t, p), group in groups.items()
        ]
        inflight = InFlight(groups, -1, None, self._clock())
        inflight.route = node
        inflight.muting = self._guarantee_order
        self._track(inflight)  # first: a failing connection completes it at once
        try:
            self._direct.send(node, inflight, self._acks, self._config.request_timeout_ms, parts)
        except RiverlogError as e:
            self._untrack(inflight)
            if e.code != ErrorCode.MESSAGE_TOO_LARGE:
                raise
            return False
        return True

    def _track(self, inflight: InFlight) -> None:
        self._in_flight.add(inflight)
        if inflight.muting:
            self._muted |= inflight.tps
        if self._direct is not None:
            route = inflight.route
            self._route_counts[route] = self._route_counts.get(route, 0) + 1
            for tp in inflight.tps:
                current = self._tp_routes.get(tp)
                if current is None:
                    self._tp_routes[tp] = [route, 1]
                else:
                    current[1] += 1  # the same route: the filter let nothing else through

    def _untrack(self, inflight: InFlight) -> None:
        self._in_flight.discard(inflight)
        if inflight.muting:
            self._muted -= inflight.tps
        if self._direct is not None:
            self._route_counts[inflight.route] -= 1
            for tp in inflight.tps:
                current = self._tp_routes.get(tp)
                if current is not None:
                    current[1] -= 1
                    if not current[1]:
                        del self._tp_routes[tp]

    def _on_direct_done(self, inflight: InFlight, outcome: Outcome) -> None:
        """On the sender thread (a direct answer, or its connection's failure)."""
        self._completions.put((inflight, outcome))

    def _send_gateway(self, groups: dict[tuple[str, int], list[ProducerBatch]]) -> None:
        idem = self.idempotence
        if self._direct is not None:
            self._direct.sent_via_gateway(groups)
        batches = [batch for group in groups.values() for batch in group]
        contexts = [b.trace_context for b in batches if b.trace_context is not None]
        unary = bool(contexts) or self._acks == common_pb2.ACKS_NONE
        timeout_ms = self._config.request_timeout_ms
        request: Any
        if unary:
            records = [
                (tp, b"".join([b.build() for b in group]) if len(group) > 1 else group[0].build())
                for tp, group in groups.items()
            ]
            request = data_pb2.ProduceRequest(  # a unary call: protobuf's serializer
                acks=self._acks,
                timeout_ms=timeout_ms,
                partitions=[
                    data_pb2.ProducePartition(topic=t, partition=p, records=r)
                    for (t, p), r in records
                ],
                transactional_id=self._transactional_id,
            )
        else:  # the stream: encoded by hand, each batch copied once (decision 0015)
            # each batch's header and records, unjoined: the request's join is their one copy
            parts: list[ProduceFramePart] = [
                (t, p, [piece for b in group for piece in b.pieces()], None)
                for (t, p), group in groups.items()
            ]
            request = EncodedProduceRequest(self._acks, timeout_ms, self._transactional_id, parts)
        try:
            if contexts:  # a traced request: its span's context rides on a call of its own
                from ..tracing import request_span

                stub, server = self._conn.stub()
                with request_span(contexts) as span:
                    future = stub.Produce.future(
                        request, timeout=self._timeout_s, metadata=self._conn.metadata
                    )
            elif self._acks == common_pb2.ACKS_NONE:  # a stream would answer nothing
                span = None
                stub, server = self._conn.stub()
                future = stub.Produce.future(
                    request, timeout=self._timeout_s, metadata=self._conn.metadata
                )
            else:
                span = None
                future, server = self._conn.submit("Produce", request, self._timeout_s)
        except Exception as e:  # closed client, or a channel that cannot take the call
            error = rpc_error(e)
            now = self._clock()
            if idem is not None:
                for batch in batches:
                    idem.on_response(batch)
            for group in groups.values():
                self._retry_or_fail(group, error, now)
            return
        inflight = InFlight(groups, server, span, self._clock())
        inflight.muting = (
            self._guarantee_order
            or self._mute_every_request
            or (unary and self._unary_one_at_a_time)
        )
        self._track(inflight)
        future.add_done_callback(lambda f: self._on_done(inflight, f))

    def _on_done(self, inflight: InFlight, future: grpc.Future) -> None:
        """On a gRPC thread: hand the outcome to the sender thread."""
        self._completions.put((inflight, future))
        self._event.set()

    # ---- settling -----------------------------------------------------------------------

    def _settle_completions(self, now: float) -> None:
        while True:
            try:
                inflight, future = self._completions.get_nowait()
            except queue.Empty:
                return
            self._untrack(inflight)
            if self.idempotence is not None:
                for group in inflight.groups.values():
                    for batch in group:
                        self.idempotence.on_response(batch)
            if inflight.span is not None:
                inflight.span.end()
            try:
                response = future.result()
            except Exception as e:
                error = rpc_error(e)
                if isinstance(e, grpc.RpcError) and GatewayConnection.should_failover(e):
                    self._conn.failover(inflight.server)
                for group in inflight.groups.values():
                    for batch in group:
                        batch.maybe_written = True  # no answer: the leader may have it
                    self._retry_or_fail(group, error, now)
                continue
            self._settle_response(inflight, response, now)

    def _settle_response(
        self, inflight: InFlight, response: data_pb2.ProduceResponse, now: float
    ) -> None:
        if inflight.route == GATEWAY:
            self._conn.throttle.record(inflight.server, response.throttle_time_ms)
        answers = {(p.topic, p.partition): p for p in response.partitions}
        if inflight.route != GATEWAY and answers:
            self._renew_if_expired(inflight, answers, now)
            self._retry_refused_via_gateway(inflight, answers, now)
        if self._acks == common_pb2.ACKS_NONE:
            # acks=0, as Kafka: nothing is acknowledged, so nothing is checked or retried; the
            # records count as sent (offset -1) once the gateway (or the leader) took them.
            for tp, group in inflight.groups.items():
                answer = answers.get(tp)
                if (
                    answer is not None
                    and answer.error_code
                    and error_for(answer.error_code, answer.error_message).refresh_metadata
                ):
                    self._metadata.invalidate(tp[0])  # the next ones find the leader
                for batch in group:
                    batch.result.complete(-1, -1, None)
                self.accumulator.release(*group)
            return
        for tp, group in inflight.groups.items():
            answer = answers.get(tp)
            if answer is None or int(answer.error_code) != ErrorCode.NONE:
                if answer is None:
                    error = RiverlogError(
                        f"the produce response has no answer for {tp[0]}-{tp[1]}",
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                    )
                else:
                    error = error_for(answer.error_code, answer.error_message)
                if leaves_outcome_unknown(None if answer is None else error.code):
                    for batch in group:
                        batch.maybe_written = True
                self._retry_or_fail(group, error, now)
            else:
                base = answer.base_offset
                append_time = answer.log_append_time_ms
                for batch in group:
                    if self.idempotence is not None:
                        self.idempotence.on_success(batch)
                    batch.result.complete(base, append_time, None)
                    base += batch.count
                self.accumulator.release(*group)

    def _renew_if_expired(
        self,
        inflight: InFlight,
        answers: dict[tuple[str, int], data_pb2.ProducePartitionResponse],
        now: float,
    ) -> None:
        """A direct answer of DELEGATION_TOKEN_EXPIRED (the grant's budget is spent, or its
        time is over; nothing was appended): the node's grant is renewed, and the batches go
        back to the front of their partitions to be sent again at once. Not a delivery
        failure: no attempt counted, no back-off."""
        expired = [
            tp
            for tp, a in answers.items()
            if int(a.error_code) == ErrorCode.DELEGATION_TOKEN_EXPIRED
        ]
        if not expired:
            return
        assert self._direct is not None
        self._direct.renew(inflight.route)
        idem = self.idempotence
        for tp in expired:
            group = inflight.groups.pop(tp, None)
            for batch in group or ():
                if idem is not None:
                    idem.on_retry(batch)
                self.accumulator.reenqueue(batch, now)

    def _retry_refused_via_gateway(
        self,
        inflight: InFlight,
        answers: dict[tuple[str, int], data_pb2.ProducePartitionResponse],
        now: float,
    ) -> None:
        """A direct answer of TOPIC_AUTHORIZATION_FAILED (nothing appended): the grant the
        frame went under did not cover the topic (a renewal's grant frame refused, the frame
        sent under the older grant), or an ACL was revoked. The gateway's answer is
        authoritative: the batches go back to the front of their partitions and their next
        request goes through the gateway, which appends them or refuses them for good."""
        if self._acks == common_pb2.ACKS_NONE:
            return
        refused = [
            tp
            for tp, a in answers.items()
            if int(a.error_code) == ErrorCode.TOPIC_AUTHORIZATION_FAILED and tp in inflight.groups
        ]
        if not refused:
            return
        assert self._direct is not None
        idem = self.idempotence
        for tp in refused:
            log.debug("%s-%d refused on node %d's direct port: retried via the gateway",
                      tp[0], tp[1], inflight.route)  # fmt: skip
            self._direct.via_gateway(tp)
            for batch in inflight.groups.pop(tp):
                if idem is not None:
                    idem.on_retry(batch)
                self.accumulator.reenqueue(batch, now)

    def _retry_or_fail(self, group: list[ProducerBatch], error: RiverlogError, now: float) -> None:
        if self._forced and error.retriable:
            # Closing by force: a batch that would have been retried is not delivered, and
            # says so (Kafka: "producer is closed forcefully"), whatever its last answer was.
            for batch in group:
                self._fail(
                    batch, ClientClosedError("producer", f"closed before delivery ({error})")
                )
            return
        retry = error.retriable
        if retry and error.refresh_metadata:
            self._metadata.invalidate(group[0].topic)
        idem = self.idempotence
        for batch in group:  # reenqueue keeps the partition's order (creation order)
            batch.attempts += 1
            deadline = batch.created + self._delivery_timeout_s
            if idem is not None and not self._forced:
                retry = idem.can_retry(batch, error)
            if retry and batch.attempts <= self._config.retries and now < deadline:
                backoff = self._config.retry_backoff_ms * 2 ** min(batch.attempts - 1, 16)
                backoff = min(backoff, self._config.retry_backoff_max_ms)
                backoff_s = backoff * random.uniform(0.8, 1.2) / 1000
                log.debug("retrying %r after %s (attempt %d)", batch, error, batch.attempts)
                batch.last_error = error
                if idem is not None:
                    idem.on_retry(batch)
                self.accumulator.reenqueue(batch, now + backoff_s)
            elif retry and now >= deadline:
                self._expire(batch, now, error)
            else:
                self._fail(batch, error)

    def _expire(self, batch: ProducerBatch, now: float, cause: BaseException | None = None) -> None:
        waited = round((now - batch.created) * 1000)
        cause = cause or batch.last_error
        last = f"; last error: {cause}" if cause is not None else ""
        self._fail(
            batch,
            ClientTimeoutError(
                f"expiring {batch.count} record(s) for {batch.topic}-{batch.partition}: "
                f"{waited} ms has passed since batch creation (delivery.timeout.ms "
                f"{self._config.delivery_timeout_ms}){last}"
            ),
        )

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.transactions is not None:  # first: its error, not the sequences' trouble
            self.transactions.on_batch_failed(error)
        if self.idempotence is not None:
            self.idempotence.on_failed(batch)
        batch.result.complete(-1, -1, error)
        self.accumulator.release(batch)
