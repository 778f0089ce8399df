"""Node registration: a node (storage, gateway, coordinator, quota) joins by RegisterNode,
which grants an etcd lease of `broker.session.timeout.ms` and puts `nodes/<kind>/<id>` under
it; Heartbeat refreshes that lease; UnregisterNode revokes it. When heartbeats stop, etcd
expires the lease, deletes the key, and the node leaves every image.

The lease lives in etcd, not in this process, so any metadata instance serves any of these
calls. A registration meets a live one with the same (kind, id): a higher (or equal)
incarnation is the same node restarted (after kill -9, its old lease still running): it
replaces the old registration and revokes its lease; a lower one is refused with
NODE_ID_IN_USE. A heartbeat on a lapsed or revoked lease answers UNKNOWN_NODE so the node
registers again.

Incarnations come from etcd, not from a clock (decision 0003): `allocate_incarnation` puts one
key and hands out the revision of that put, which is above every revision before it, so a
restarted process outranks its predecessor even after the wall clock stepped back.

A storage node's heartbeat carries the replicas on its offline log dirs; they are added to its
registration (decision 0022), where the controller reads them. They only grow: the node clears
them by restarting, which registers anew.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..config import MetadataConfig
from ..records import node_decode, node_encode
from ..store import Compare, EtcdStore, Op
from .replica_sizes import ReplicaSizeBook

log = logging.getLogger(__name__)

REGISTRABLE_KINDS = ("storage", "gateway", "coordinator", "quota")
_MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Registered:
    lease_id: int
    lease_ttl_ms: int
    heartbeat_interval_ms: int
    cluster_id: str


def validate_node(node: NodeInfo) -> None:
    """Reject registrations no node could mean (INVALID_REQUEST)."""
    problems = []
    if node.kind not in REGISTRABLE_KINDS:
        problems.append(f"kind {node.kind!r} cannot register (one of {REGISTRABLE_KINDS})")
    if node.node_id < 0:
        problems.append(f"node_id must be >= 0, got {node.node_id}")
    if not node.host or len(node.host) > 255 or any(c.isspace() for c in node.host):
        problems.append(f"host {node.host[:64]!r} is not a host name")
    if not 0 < node.port < 65536:
        problems.append(f"port {node.port} is out of range")
    if not 0 <= node.zero_copy_port < 65536:
        problems.append(f"zero_copy_port {node.zero_copy_port} is out of range")
    if not 0 <= node.direct_port < 65536:
        problems.append(f"direct_port {node.direct_port} is out of range")
    if len(node.rack) > 255:
        problems.append("rack is longer than 255 characters")
    if problems:
        raise RiverlogError("; ".join(problems), ErrorCode.INVALID_REQUEST)


class NodeRegistry:
    """Registrations in etcd. Stateless apart from the store: safe on every instance."""

    def __init__(
        self,
        store: EtcdStore,
        config: MetadataConfig,
        cluster_id: str,
        sizes: ReplicaSizeBook | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.cluster_id = cluster_id
        self.keys = store.keys
        self.sizes = sizes

    async def register(self, node: NodeInfo) -> Registered:
        validate_node(node)
        key = self.keys.node(node.kind, node.node_id)
        for _ in range(_MAX_ATTEMPTS):
            current = await self.store.get(key)
            old_lease = 0
            if current is not None:
                old, old_lease = node_decode(current.value)
                if node.incarnation < old.incarnation:
                    raise RiverlogError(
                        f"{node.kind} node {node.node_id} is held by a live process "
                        f"(incarnation {old.incarnation} > {node.incarnation})",
                        ErrorCode.NODE_ID_IN_USE,
                    )
            lease = await self.store.grant_lease(self.config.session_timeout_ms)
            expected = current.mod_revision if current is not None else 0
            put = Op(key, node_encode(node, lease), lease)
            if await self.store.txn([Compare(key, expected)], [put]) is None:
                await self.store.revoke_lease(lease)  # lost a race with another registration
                continue
            if old_lease and old_lease != lease:
                await self.store.revoke_lease(old_lease)
                log.info(
                    "%s node %d: incarnation %d replaced the previous one",
                    node.kind,
                    node.node_id,
                    node.incarnation,
                )
            log.info("registered %s node %d at %s", node.kind, node.node_id, node.address)
            return Registered(
                lease_id=lease,
                lease_ttl_ms=self.config.session_timeout_ms,
                heartbeat_interval_ms=self.config.told_heartbeat_interval_ms,
                cluster_id=self.cluster_id,
            )
        raise RiverlogError(
            f"{node.kind} node {node.node_id}: registrations keep racing; retry",
            ErrorCode.NODE_ID_IN_USE,
        )

    async def allocate_incarnation(self, kind: str, node_id: int) -> int:
        """A new incarnation for (kind, node_id): the revision of a put, and above the live
        registration's (one from before incarnations came from etcd may hold a clock value)."""
        revision = await self.store.txn(
            [], [Op(self.keys.node_incarnation, f"{kind}/{node_id}".encode())]
        )
        if revision is None:
            raise RiverlogError("etcd refused an unconditional put", ErrorCode.UNKNOWN_SERVER_ERROR)
        current = await self.store.get(self.keys.node(kind, node_id))
        live = node_decode(current.value)[0].incarnation if current is not None else 0
        return max(revision, live + 1)

    async def heartbeat(
        self,
        node_id: int,
        lease_id: int,
        offline_replicas: Collection[TopicPartition] = (),
        replica_sizes: Mapping[TopicPartition, int] | None = None,
    ) -> int:
        """Refresh the node's lease; its TTL in ms. UNKNOWN_NODE when it no longer exists."""
        if lease_id <= 0:
            raise RiverlogError(f"node {node_id}: no lease {lease_id}", ErrorCode.UNKNOWN_NODE)
        ttl_s = await self.store.refresh_lease(lease_id)
        if ttl_s <= 0:
            raise RiverlogError(
                f"node {node_id}: lease {lease_id:x} has lapsed; register again",
                ErrorCode.UNKNOWN_NODE,
            )
        if offline_replicas:
            await self._record_offline(node_id, lease_id, frozenset(offline_replicas))
        if replica_sizes and self.sizes is not None:
            try:  # for the balancer only: never fails the heartbeat
                await self.sizes.record(node_id, lease_id, replica_sizes)
            except RiverlogError as exc:
                log.info("replica sizes of node %d not recorded: %s", node_id, exc)
        return self.config.session_timeout_ms

    async def _record_offline(
        self, node_id: int, lease_id: int, offline: frozenset[TopicPartition]
    ) -> None:
        """Add `offline` to storage node `node_id`'s registration of `lease_id` (a lost race
        is left to the next heartbeat, which carries them again)."""
        key = self.keys.node("storage", node_id)
        current = await self.store.get(key)
        if current is None:
            return
        node, lease = node_decode(current.value)
        if lease != lease_id or offline <= node.offline_replicas:
            return
        merged = replace(node, offline_replicas=node.offline_replicas | offline)
        put = Op(key, node_encode(merged, lease), lease)
        if await self.store.txn([Compare(key, current.mod_revision)], [put]) is not None:
            log.warning(
                "storage node %d reports offline replicas: %s",
                node_id,
                ", ".join(str(tp) for tp in sorted(offline - node.offline_replicas)),
            )

    async def unregister(self, node_id: int, lease_id: int) -> None:
        if lease_id <= 0:
            raise RiverlogError(f"node {node_id}: no lease {lease_id}", ErrorCode.UNKNOWN_NODE)
        await self.store.revoke_lease(lease_id)
        log.info("node %d unregistered (lease %x)", node_id, lease_id)
