"""Ownership of the `__consumer_offsets` partitions by coordinator instances (decision 0008).

The controller creates the topic once a coordinator instance has registered (with
offsets.topic.num.partitions partitions, a replication factor of offsets.topic.replication.factor
capped at the live storage nodes, min.insync.replicas 2 where the factor is 3 or more, and
retention.ms -1 until compaction exists), then gives each partition to one live coordinator,
spread evenly, under `coordinators/<p>` in etcd. Every change of owner bumps the partition's
coordinator epoch: the new owner writes with it as its producer epoch, and the old owner — a
zombie, whose lease lapsed — is fenced. Reassignment follows the image: a coordinator's lease
lapsing removes its registration, which wakes this loop.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Final

from riverlog.common.cluster.image import CoordinatorAssignment
from riverlog.common.errors import ErrorCode, RiverlogError

from ..config import MetadataConfig
from ..image import MetadataImage
from ..records import coordinator_encode
from ..store import Op
from .background import cancel_all, wait_woken
from .election import ControllerElection
from .topics import NewTopic, TopicController

log = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
NO_COORDINATOR: Final = -1
_OPS_PER_TXN = 100
_RECHECK_S = 2.0


def plan_assignment(
    num_partitions: int,
    current: Mapping[int, CoordinatorAssignment],
    live: Mapping[int, int] | Sequence[int],
) -> list[CoordinatorAssignment]:
    """Pure: the assignments to write so that every partition has a live owner and no owner
    holds more than ceil(partitions / owners). Owners keep what they can (only orphans and the
    excess of overloaded owners move); each move bumps the partition's epoch, and so does a
    restart of its owner (`live` maps node id → incarnation). With no live coordinator,
    orphaned partitions get owner -1."""
    incarnations = dict(live) if isinstance(live, Mapping) else dict.fromkeys(live, 0)
    live_set = set(incarnations)
    owners = {
        p: a.coordinator_id
        for p, a in current.items()
        if p < num_partitions and a.coordinator_id in live_set
    }
    changes: list[CoordinatorAssignment] = []

    def move(p: int, owner: int) -> None:
        old = current.get(p)
        incarnation = incarnations.get(owner, 0)
        if old is None or (old.coordinator_id, old.incarnation) != (owner, incarnation):
            epoch = (old.epoch if old else 0) + 1
            changes.append(CoordinatorAssignment(p, owner, epoch, incarnation))

    if not live_set:
        for p in range(num_partitions):
            move(p, NO_COORDINATOR)
        return changes
    cap = math.ceil(num_partitions / len(live_set))
    load = dict.fromkeys(sorted(live_set), 0)
    for owner in owners.values():
        load[owner] += 1
    moving: list[int] = []
    for node in sorted(live_set):
        owned = sorted(p for p, o in owners.items() if o == node)
        excess = len(owned) - cap
        if excess > 0:
            moving += owned[-excess:]
            load[node] -= excess
    orphans = sorted([p for p in range(num_partitions) if p not in owners] + moving)
    for p, owner in sorted(owners.items()):
        if p not in moving:
            move(p, owner)  # a no-op unless the owner restarted
    for p in orphans:
        node = min(load, key=lambda n: (load[n], n))
        load[node] += 1
        move(p, node)
    return changes


def offsets_topic_configs(replication_factor: int) -> tuple[tuple[str, str], ...]:
    """Kafka's __consumer_offsets: compacted (the latest commit of each key stays), never
    deleted by age."""
    return (
        ("cleanup.policy", "compact"),
        ("min.insync.replicas", "2" if replication_factor >= 3 else "1"),
        ("retention.ms", "-1"),
    )


class CoordinatorAssigner:
    """Runs on every metadata instance, acts only while it is the controller. Lifecycle:
    `start()` after the election started, `await stop()`. One task; woken by image changes."""

    def __init__(
        self,
        election: ControllerElection,
        image: MetadataImage,
        topics: TopicController,
        config: MetadataConfig,
    ) -> None:
        self.election = election
        self.image = image
        self.topics = topics
        self.config = config
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        image.add_listener(self._wake.set)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="coordinator-assigner")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_all([task])

    async def _run(self) -> None:
        while True:
            await wait_woken(self._wake, _RECHECK_S)
            if not self.election.is_controller:
                continue
            try:
                await self.reconcile()
            except RiverlogError as exc:
                log.warning("coordinator assignment: %s", exc)
            except Exception:
                log.exception("coordinator assignment failed")

    async def reconcile(self) -> None:
        cluster = self.image.cluster
        coordinators = {n.node_id: n.incarnation for n in cluster.nodes_of_kind("coordinator")}
        topic = cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            storage = cluster.nodes_of_kind("storage")
            if coordinators and storage:
                await self._create_topic(len(storage))
            return
        changes = plan_assignment(len(topic.partitions), cluster.coordinators, coordinators)
        if not changes:
            return
        ops = [Op(self.image.keys.coordinator(c.partition), coordinator_encode(c)) for c in changes]
        for start in range(0, len(ops), _OPS_PER_TXN):
            await self.election.write([], ops[start : start + _OPS_PER_TXN])
        log.info(
            "%s: %d partitions change owner or epoch (live coordinators %s)",
            OFFSETS_TOPIC,
            len(changes),
            sorted(coordinators),
        )

    async def _create_topic(self, storage_nodes: int) -> None:
        rf = min(self.config.offsets_topic_replication_factor, storage_nodes)
        partitions = self.config.offsets_topic_num_partitions
        [result] = await self.topics.create_topics(
            [NewTopic(OFFSETS_TOPIC, partitions, rf, offsets_topic_configs(rf))]
        )
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            # no wake-up: the next check waits for a change or the recheck interval (a wake
            # here spun the event loop while the creation kept failing, e.g. with every
            # storage node but one draining)
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, result.error_message)
            return
        log.info("created %s: %d partitions, replication factor %d", OFFSETS_TOPIC, partitions, rf)
        self._wake.set()
