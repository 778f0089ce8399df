"""Cluster membership for any Riverlog process: register with the metadata service, keep the
lease alive by heartbeat, register again when the lease lapsed, unregister on the way out.

The lease itself lives in etcd (the metadata service holds none of it in memory), so any
metadata instance may answer a heartbeat. A node that stops heartbeating for longer than
`broker.session.timeout.ms` disappears from the cluster image.

A storage node's heartbeat (and any registration after the first) also carries the replicas on
its offline log dirs, from `offline_replicas`; `heartbeat_now()` sends them without waiting
for the next interval (decision 0022).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import metadata_pb2

from .client import MetadataClient
from .convert import node_to_proto, tps_to_proto
from .image import NodeInfo

log = logging.getLogger(__name__)

_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 2.0


@dataclass(frozen=True, slots=True)
class Registration:
    """What the metadata service granted: the lease and how often to heartbeat."""

    lease_id: int
    lease_ttl_ms: int
    heartbeat_interval_ms: int
    cluster_id: str


RegisteredCallback = Callable[[Registration], Awaitable[None] | None]
OfflineReplicas = Callable[[], frozenset[TopicPartition]]
ReplicaSizes = Callable[[], Mapping[TopicPartition, int]]
REPLICA_SIZES_S = 10.0
"""How often at most a heartbeat carries the node's replica sizes (the balancer's disk goal
needs them roughly, not at every beat)."""


def _no_offline_replicas() -> frozenset[TopicPartition]:
    return frozenset()


class MembershipSession:
    """One node's membership. Lifecycle: `await start()` (returns once registered), then a
    heartbeat task runs on the caller's event loop until `await stop()` (which unregisters).

    `fenced` becomes True when a newer incarnation of the same node id took over: the session
    then stops heartbeating and the owner should exit.
    """

    def __init__(
        self,
        client: MetadataClient,
        node: NodeInfo,
        on_registered: RegisteredCallback | None = None,
        offline_replicas: OfflineReplicas | None = None,
        replica_sizes: ReplicaSizes | None = None,
    ) -> None:
        self.client = client
        self.node = node
        self.on_registered = on_registered
        self.offline_replicas = offline_replicas or _no_offline_replicas
        self.replica_sizes = replica_sizes
        self._sizes_sent = -REPLICA_SIZES_S
        self._beat_now = asyncio.Event()
        self.registration: Registration | None = None
        self.fenced = False
        # time.monotonic() when the lease was last known alive: the send time of the last
        # registration or heartbeat that succeeded (so it errs early). A node that holds
        # leadership refuses writes once this is older than the lease TTL (self-fencing).
        self.renewed_monotonic = 0.0
        self.registrations = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def lease_ttl_ms(self) -> int:
        return self.registration.lease_ttl_ms if self.registration else 0

    @property
    def lease_id(self) -> int:
        return self.registration.lease_id if self.registration else 0

    async def start(self) -> Registration:
        """Register, retrying with backoff while the service is unreachable; raises
        RiverlogError for a refusal (NODE_ID_IN_USE, a bad registration)."""
        registration = await self._register_until_answered()
        self._task = asyncio.create_task(self._heartbeat_loop(), name="membership-heartbeat")
        return registration

    async def stop(self, unregister: bool = True) -> None:
        """Stop heartbeating and release the registration (best effort). With
        `unregister=False` the registration is left to lapse, as after a crash."""
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if unregister and self.registration is not None and not self.fenced:
            try:
                await self.client.unregister_node(self.node.node_id, self.registration.lease_id)
            except RiverlogError as exc:
                log.info("unregister of %s failed: %s", self.node.key, exc)
        self.registration = None

    def heartbeat_now(self) -> None:
        """Send the next heartbeat at once (its offline replicas changed)."""
        self._beat_now.set()

    def _sizes_due(self, now: float) -> list[metadata_pb2.ReplicaSize]:
        """The replica sizes when REPLICA_SIZES_S passed since they were last sent, else none."""
        if self.replica_sizes is None or now - self._sizes_sent < REPLICA_SIZES_S:
            return []
        self._sizes_sent = now
        return [
            metadata_pb2.ReplicaSize(topic=tp.topic, partition=tp.partition, size_bytes=size)
            for tp, size in sorted(self.replica_sizes().items())
        ]

    async def _register_once(self) -> Registration:
        node = replace(self.node, offline_replicas=self.offline_replicas())
        request = metadata_pb2.RegisterNodeRequest(node=node_to_proto(node))
        sent = time.monotonic()
        response = await self.client.register_node(request)
        if int(response.error_code) != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        ttl = response.lease_ttl_ms
        interval = response.heartbeat_interval_ms or max(ttl // 3, 1)
        registration = Registration(
            lease_id=response.lease_id,
            lease_ttl_ms=ttl,
            heartbeat_interval_ms=min(interval, max(ttl // 3, 1)),
            cluster_id=response.cluster_id,
        )
        self.registration = registration
        self.renewed_monotonic = sent
        self.registrations += 1
        log.info("registered %s (lease %x, ttl %d ms)", self.node.key, registration.lease_id, ttl)
        if self.on_registered is not None:
            result = self.on_registered(registration)
            if inspect.isawaitable(result):
                await result
        return registration

    async def _register_until_answered(self) -> Registration:
        backoff = _BACKOFF_START_S
        while True:
            try:
                return await self._register_once()
            except RiverlogError as exc:
                if not exc.retriable or self._stopping.is_set():
                    raise
                log.info("registration of %s failed (%s); retrying", self.node.key, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _heartbeat_loop(self) -> None:
        while not self._stopping.is_set():
            assert self.registration is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._beat_now.wait(), self.registration.heartbeat_interval_ms / 1000
                )
            self._beat_now.clear()
            sent = time.monotonic()
            # Each attempt well within the lease: an instance that hangs (paused, partitioned)
            # costs a third of it before the client moves on to the next one, not the lease.
            attempt_s = max(0.1, self.registration.lease_ttl_ms / 3000)
            # The whole call (every instance, both rounds) also under an asyncio deadline:
            # gRPC's own deadlines fire through its completion queue, so a transport that
            # stopped delivering completions would otherwise stall the heartbeat silently.
            whole_s = 2 * len(self.client.addresses) * attempt_s + 1.0
            try:
                response = await asyncio.wait_for(
                    self.client.heartbeat(
                        self.node.node_id,
                        self.registration.lease_id,
                        attempt_s,
                        tps_to_proto(self.offline_replicas()),
                        self._sizes_due(sent),
                    ),
                    whole_s,
                )
            except TimeoutError:
                log.error(
                    "heartbeat of %s got no answer, not even a failure, within %.1f s",
                    self.node.key,
                    whole_s,
                )
                continue
            except RiverlogError as exc:
                log.warning("heartbeat of %s failed: %s", self.node.key, exc)
                continue
            except Exception:
                # Never let the heartbeat die quietly: a node that stops renewing its lease
                # for a reason nobody logged is the worst failure to diagnose.
                log.exception("heartbeat of %s failed unexpectedly; retrying", self.node.key)
                continue
            if int(response.error_code) == ErrorCode.NONE:
                self.renewed_monotonic = max(self.renewed_monotonic, sent)
                continue
            if int(response.error_code) != ErrorCode.UNKNOWN_NODE:
                log.warning("heartbeat of %s refused: %s", self.node.key, response.error_message)
                continue
            log.warning("lease of %s lapsed; registering again", self.node.key)
            try:
                await self._register_until_answered()
            except RiverlogError as exc:
                if exc.code == ErrorCode.NODE_ID_IN_USE:
                    log.error("%s was taken over by a newer incarnation", self.node.key)
                    self.fenced = True
                    return
                log.warning("registration of %s refused: %s", self.node.key, exc)
