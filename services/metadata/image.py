"""The in-memory cluster image of one metadata instance, fed by a single etcd watch of the
whole prefix, and published to Watch subscribers as a snapshot followed by deltas.

Every instance (controller or standby) keeps one, so every instance serves reads and Watch
streams without touching etcd. Versions are etcd revisions. When the etcd watch breaks, the
image re-reads everything and sends each subscriber a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from riverlog.common.cluster.image import (
    ClusterDelta,
    ClusterImage,
    CoordinatorAssignment,
    NodeInfo,
    NodeKey,
    PartitionInfo,
    TopicInfo,
)

from .follower import EtcdFollower
from .records import (
    ControllerRecord,
    InstanceRecord,
    TopicRecord,
    coordinator_decode,
    draining_nodes_decode,
    node_configs_decode,
    node_decode,
    partition_decode,
    topic_info,
)
from .store import NODE_CONFIG_DEFAULT_KEY, Change, Entry, EtcdStore

log = logging.getLogger(__name__)

SUBSCRIBER_QUEUE = 1024


@dataclass(eq=False)
class Subscription:
    """One Watch stream's feed. `next()` yields deltas in version order, or a fresh snapshot
    when the subscriber fell behind or the image was rebuilt."""

    image: MetadataImage
    queue: asyncio.Queue[ClusterDelta] = field(
        default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE)
    )
    resync: bool = False

    def offer(self, delta: ClusterDelta) -> None:
        try:
            self.queue.put_nowait(delta)
        except asyncio.QueueFull:
            self.resync = True
            self.queue = asyncio.Queue(SUBSCRIBER_QUEUE)
            self.queue.put_nowait(self.image.cluster.to_snapshot())

    async def next(self) -> ClusterDelta:
        if self.resync:
            self.resync = False
            self.queue = asyncio.Queue(SUBSCRIBER_QUEUE)
            return self.image.cluster.to_snapshot()
        return await self.queue.get()


class MetadataImage:
    """Owned by the event loop. Lifecycle: `await start()` (initial read + watch), `stop()`."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.keys = store.keys
        self.cluster = ClusterImage.empty()
        self.controller: ControllerRecord | None = None
        self.last_epoch = 0
        self.instances: dict[int, InstanceRecord] = {}
        self.node_leases: dict[NodeKey, int] = {}
        # key → mod revision of every key under the prefix: the compare of a conditional write.
        self.revisions: dict[str, int] = {}
        self._topic_records: dict[str, TopicRecord] = {}
        self._partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._coordinators: dict[int, CoordinatorAssignment] = {}
        self._node_configs: dict[str, Mapping[str, str]] = {}
        # Storage nodes being drained (controller state, read by the controller's placement,
        # reassignment checks and balancer; not part of the image other processes follow).
        self.draining: frozenset[int] = frozenset()
        self._subscribers: set[Subscription] = set()
        self._listeners: list[Callable[[], None]] = []
        self._changed = asyncio.Event()
        # Waits for a version that gave up: a write whose revision the watch never delivered.
        self.wait_timeouts = 0
        self._follower = EtcdFollower(
            store, self._load, self._apply, what="image", task_name="metadata-image"
        )

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._follower.start()

    async def stop(self) -> None:
        await self._follower.stop()

    def add_listener(self, callback: Callable[[], None]) -> None:
        """`callback()` after every change (on the loop); read the image from it."""
        self._listeners.append(callback)

    def subscribe(self) -> tuple[ClusterDelta, Subscription]:
        """The current snapshot and a feed of every later delta (atomic: nothing is missed)."""
        sub = Subscription(self)
        self._subscribers.add(sub)
        return self.cluster.to_snapshot(), sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)

    async def wait_for_version(self, version: int, timeout_s: float = 10.0) -> bool:
        """Wait until the image reflects etcd revision `version`; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.cluster.version < version:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self.wait_timeouts += 1
                log.warning(
                    "the image waited %.1f s for revision %d and is still at %d",
                    timeout_s,
                    version,
                    self.cluster.version,
                )
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
        return True

    # --- feeding -------------------------------------------------------------------------------

    def _load(self, revision: int, entries: dict[str, Entry]) -> None:
        """Rebuild from a full read (start, or after the etcd watch broke)."""
        self.revisions = {k: v.mod_revision for k, v in entries.items()}
        self._rebuild(revision, {k: v.value for k, v in entries.items()})

    def _rebuild(self, revision: int, values: dict[str, bytes]) -> None:
        self.controller = None
        self.instances.clear()
        self.node_leases.clear()
        self._topic_records.clear()
        self._partitions.clear()
        self._coordinators.clear()
        self._node_configs.clear()
        self.draining = frozenset()
        nodes: dict[NodeKey, NodeInfo] = {}
        cluster_id = ""
        for key, value in values.items():
            cluster_id = self._absorb(key, value, nodes, set()) or cluster_id
        topics = {
            name: topic_info(name, rec, self._partitions.get(name, {}))
            for name, rec in self._topic_records.items()
        }
        self.cluster = ClusterImage(
            version=revision,
            cluster_id=cluster_id,
            controller_id=self.controller.instance_id if self.controller else -1,
            controller_epoch=self.controller.epoch if self.controller else self.last_epoch,
            nodes=MappingProxyType(nodes),
            topics=MappingProxyType(topics),
            coordinators=MappingProxyType(dict(self._coordinators)),
            metadata_addresses=self._instance_addresses(),
            node_configs=MappingProxyType(dict(self._node_configs)),
        )
        self._publish(self.cluster.to_snapshot())

    def _absorb(
        self, key: str, value: bytes | None, nodes: dict[NodeKey, NodeInfo], topics: set[str]
    ) -> str | None:
        """Fold one key's new value (None: deleted) into the state; returns a cluster id read.
        Touched topic names go into `topics`; `nodes` is updated in place."""
        rel = self.keys.relative(key)
        head, _, rest = rel.partition("/")
        try:
            if rel == "cluster_id" and value is not None:
                return value.decode()
            if rel == "controller":
                self.controller = ControllerRecord.decode(value) if value is not None else None
            elif rel == "controller_epoch" and value is not None:
                self.last_epoch = int(value)
            elif head == "instances":
                if value is None:
                    self.instances.pop(int(rest), None)
                else:
                    self.instances[int(rest)] = InstanceRecord.decode(value)
            elif head == "nodes":
                kind, _, node_id = rest.partition("/")
                if value is None:
                    nodes.pop((kind, int(node_id)), None)
                    self.node_leases.pop((kind, int(node_id)), None)
                else:
                    node, lease = node_decode(value)
                    nodes[node.key] = node
                    self.node_leases[node.key] = lease
            elif head == "topics":
                topics.add(rest)
                if value is None:
                    self._topic_records.pop(rest, None)
                else:
                    self._topic_records[rest] = TopicRecord.decode(value)
            elif head == "node_configs":
                entity = "" if rest == NODE_CONFIG_DEFAULT_KEY else rest
                if value is None:
                    self._node_configs.pop(entity, None)
                else:
                    self._node_configs[entity] = node_configs_decode(value)
            elif key == self.keys.draining_nodes:
                self.draining = draining_nodes_decode(value) if value is not None else frozenset()
            elif head == "coordinators" and value is not None:
                self._coordinators[int(rest)] = coordinator_decode(int(rest), value)
            elif head == "partitions":
                topic, _, p = rest.rpartition("/")
                topics.add(topic)
                parts = self._partitions.setdefault(topic, {})
                if value is None:
                    parts.pop(int(p), None)
                    if not parts:
                        del self._partitions[topic]
                else:
                    parts[int(p)] = partition_decode(int(p), value)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring malformed etcd value at %s: %s", key, exc)
        return None

    def _apply(self, revision: int, changes: list[Change]) -> None:
        if revision <= self.cluster.version:
            return
        nodes = dict(self.cluster.nodes)
        touched: set[str] = set()
        cluster_id = self.cluster.cluster_id
        for change in changes:
            cluster_id = self._absorb(change.key, change.value, nodes, touched) or cluster_id
            if change.value is None:
                self.revisions.pop(change.key, None)
            else:
                self.revisions[change.key] = change.mod_revision
        topics = dict(self.cluster.topics)
        upserts: list[TopicInfo] = []
        removed: list[str] = []
        for name in sorted(touched):
            record = self._topic_records.get(name)
            if record is None:
                if topics.pop(name, None) is not None:
                    removed.append(name)
                continue
            info = topic_info(name, record, self._partitions.get(name, {}))
            topics[name] = info
            upserts.append(info)
        old_nodes = self.cluster.nodes
        old_coordinators = self.cluster.coordinators
        addresses = self._instance_addresses()
        old_configs = self.cluster.node_configs
        delta = ClusterDelta(
            version=revision,
            controller_id=self.controller.instance_id if self.controller else -1,
            controller_epoch=self.controller.epoch if self.controller else self.last_epoch,
            cluster_id=cluster_id,
            nodes=tuple(n for k, n in sorted(nodes.items()) if old_nodes.get(k) != n),
            removed_nodes=tuple(sorted(k for k in old_nodes if k not in nodes)),
            topics=tuple(upserts),
            removed_topics=tuple(removed),
            coordinators=tuple(
                c for p, c in sorted(self._coordinators.items()) if old_coordinators.get(p) != c
            ),
            metadata_addresses=addresses if addresses != self.cluster.metadata_addresses else (),
            node_configs=tuple(
                (name, configs)
                for name, configs in sorted(self._node_configs.items())
                if old_configs.get(name) != configs
            ),
            removed_node_configs=tuple(
                sorted(name for name in old_configs if name not in self._node_configs)
            ),
        )
        self.cluster = self.cluster.apply_delta(delta)
        self._publish(delta)

    def _instance_addresses(self) -> tuple[str, ...]:
        """The live metadata instances' addresses, by instance id."""
        return tuple(f"{r.host}:{r.port}" for _, r in sorted(self.instances.items()))

    def _publish(self, delta: ClusterDelta) -> None:
        for sub in list(self._subscribers):
            sub.offer(delta)
        self._changed.set()
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                log.exception("image listener failed")
