"""Grants for direct data access (decision 0047): what lets the SDK send fetch (or produce)
frames straight to a partition leader's direct port instead of through a gateway.

A grant is asked of the gateway (`GrantDataAccess`) per (storage node, operation), naming every
topic the client uses on that node (a topic not covered yet asks for a new one covering the
old ones too). The next one is asked in the background, while the current one serves, once
half its bytes are used or shortly before it expires (the node answers
DELEGATION_TOKEN_EXPIRED once they are all spent, which costs a round trip); an answer that it
expired drops it. Where direct access cannot be had the answer is None and the caller uses the
gateway for that node: the cluster offers none (DELEGATION_TOKEN_AUTH_DISABLED, or a gateway
without the RPC), the node has no direct port, or the gateway refused (a topic not authorized,
an unknown node), asked again after metadata.max.age.ms; a failed call is retried after
retry.backoff.ms, doubling up to that. The grant's throttle_time_ms (the byte-rate quota it
was charged to) is recorded with the gateway's other throttles, so the client pauses as after
a throttled fetch.

Thread-safe: a lock around everything but the look-up of a grant that needs nothing done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

import grpc

from riverlog.common.errors import ErrorCode
from riverlog.v1 import gateway_pb2

from ._connection import GatewayConnection, rpc_error

__all__ = ["READ", "WRITE", "DataGrant", "GrantKeeper"]

READ: Final = gateway_pb2.DATA_ACCESS_READ
WRITE: Final = gateway_pb2.DATA_ACCESS_WRITE

RENEW_BEFORE_S: Final = 5.0
"""A grant is renewed this long before it expires (or at half its life, if that is shorter)."""
RENEW_SPENT: Final = 0.5
"""...or once this share of its byte budget was read or sent by this client (fetches in flight
may take a good part of the rest before the new grant is there)."""
EXPIRY_SLACK_S: Final = 1.0
"""A grant is not used this close to its expiry (clocks and frames in flight)."""


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
    renew_at: float  # time.monotonic(): ask for the next one (meanwhile this one serves)
    usable_until: float  # time.monotonic()
    serial: int


class GrantKeeper:
    """The grants of one client for one operation (READ or WRITE). A grant due for renewal
    keeps serving while the next one is asked for in the background (a gRPC future, taken at a
    later `grant` call); a missing one, or one that does not cover a topic, is asked for at
    once (the call blocks)."""

    def __init__(
        self,
        conn: GatewayConnection,
        operation: gateway_pb2.DataAccessOperation,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        metadata_max_age_ms: int,
    ) -> None:
        self._conn = conn
        self._operation = operation
        self._timeout_s = request_timeout_ms / 1000
        self._backoff_s = max(retry_backoff_ms, 1) / 1000
        self._retry_s = metadata_max_age_ms / 1000
        self._lock = threading.Lock()
        self._grants: dict[int, DataGrant] = {}
        self._spent: dict[int, int] = {}  # bytes used under the node's current grant
        self._renewing: dict[int, tuple[frozenset[str], Future[Any]]] = {}
        self._not_before: dict[int, float] = {}  # node -> no direct access until (monotonic)
        self._failures: dict[int, int] = {}
        self._disabled_until = 0.0  # the whole cluster: no direct access until
        self._serial = 0
        self.granted = 0
        """Grants obtained since the start (tests and metrics: the direct path was taken)."""

    def grant(self, node_id: int, topics: Iterable[str]) -> DataGrant | None:
        """A grant for `node_id` covering `topics`, asked for now if need be; None: use the
        gateway for that node."""
        now = time.monotonic()
        current = self._grants.get(node_id)
        if (
            current is not None
            and now < current.renew_at
            and current.topics.issuperset(topics)
            and self._spent.get(node_id, 0) < current.byte_budget * RENEW_SPENT
        ):
            return current  # the common case: no lock
        with self._lock:
            renewing = self._renewing.get(node_id)
            if renewing is not None and renewing[1].done():
                del self._renewing[node_id]
                self._install(node_id, renewing[0], renewing[1], now)
            current = self._grants.get(node_id)
            if current is not None and current.topics.issuperset(topics):
                if node_id not in self._renewing and (
                    now >= current.renew_at
                    or self._spent.get(node_id, 0) >= current.byte_budget * RENEW_SPENT
                ):
                    self._renewing[node_id] = (current.topics, self._call(node_id, current.topics))
                if now < current.usable_until:
                    return current
            if now < self._disabled_until or now < self._not_before.get(node_id, 0.0):
                return None
            wanted = frozenset(topics) | (current.topics if current is not None else frozenset())
            renewing = self._renewing.pop(node_id, None)
            if renewing is not None and renewing[0].issuperset(wanted):
                return self._install(node_id, renewing[0], renewing[1], now)
            return self._install(node_id, wanted, self._call(node_id, wanted), now)

    def _call(self, node_id: int, topics: frozenset[str]) -> Future[Any]:
        request = gateway_pb2.GrantDataAccessRequest(
            operation=self._operation, topics=sorted(topics), node_id=node_id
        )
        stub, index = self._conn.stub()
        future: Future[Any] = stub.GrantDataAccess.future(
            request, timeout=self._timeout_s, metadata=self._conn.metadata
        )
        future.add_done_callback(lambda f: self._failed_over(f, index))
        return future

    def _failed_over(self, future: Future[Any], index: int) -> None:
        error = future.exception()
        if isinstance(error, grpc.RpcError) and GatewayConnection.should_failover(error):
            self._conn.failover(index)

    def _install(
        self, node_id: int, topics: frozenset[str], future: Future[Any], now: float
    ) -> DataGrant | None:
        """The grant `future` brings (waiting for it), kept for `node_id`; None if refused."""
        try:
            response = future.result()
        except Exception as exc:
            failed = rpc_error(exc).code
            if failed in (ErrorCode.UNSUPPORTED_VERSION, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED):
                self._disable_all(now)  # a gateway without the RPC (UNIMPLEMENTED)
            else:
                self._refused(node_id, now)
            return None
        code = int(response.error_code)
        if code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED:
            self._disable_all(now)
            return None
        self._conn.throttle.record(self._conn.stub()[1], response.throttle_time_ms)
        if code != ErrorCode.NONE or not response.direct_port or not response.grant:
            self._refused(node_id, now, at_once=True)
            return None
        self._serial += 1
        life_s = max(response.expires_at_ms / 1000 - time.time(), 0.0)
        grant = DataGrant(
            node_id=node_id,
            topics=topics,
            token=response.grant,
            byte_budget=max(response.byte_budget, 1),
            host=response.host,
            port=response.direct_port,
            renew_at=now + max(min(life_s - RENEW_BEFORE_S, life_s / 2), 0.0),
            usable_until=now + life_s - EXPIRY_SLACK_S,
            serial=self._serial,
        )
        self._grants[node_id] = grant
        self._spent[node_id] = 0
        self._failures.pop(node_id, None)
        self.granted += 1
        return grant

    def _disable_all(self, now: float) -> None:
        self._grants.clear()
        self._disabled_until = now + self._retry_s

    def _refused(self, node_id: int, now: float, at_once: bool = False) -> None:
        """No direct access to `node_id` for a while: metadata.max.age.ms after a refusal,
        retry.backoff.ms doubling up to it after a failed call."""
        self._grants.pop(node_id, None)
        failures = self._failures[node_id] = self._failures.get(node_id, 0) + 1
        backoff = min(self._backoff_s * 2 ** min(failures, 20), self._retry_s)
        self._not_before[node_id] = now + (self._retry_s if at_once else backoff)

    def spend(self, node_id: int, serial: int, nbytes: int) -> None:
        """`nbytes` were read or sent under grant `serial` of `node_id`."""
        grant = self._grants.get(node_id)
        if grant is not None and grant.serial == serial:
            self._spent[node_id] = self._spent.get(node_id, 0) + nbytes

    def expired(self, node_id: int, serial: int) -> None:
        """The node answered DELEGATION_TOKEN_EXPIRED under grant `serial`: ask anew."""
        with self._lock:
            grant = self._grants.get(node_id)
            if grant is not None and grant.serial == serial:
                del self._grants[node_id]

    def unreachable(self, node_id: int) -> None:
        """The node's direct port refused a connection, or its grant: the gateway for that
        node until metadata.max.age.ms has passed."""
        with self._lock:
            self._refused(node_id, time.monotonic(), at_once=True)

    def close(self) -> None:
        with self._lock:
            renewing, self._renewing = self._renewing, {}
        for _, future in renewing.values():
            future.cancel()
