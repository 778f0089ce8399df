"""The replica balancer on the controller (decision 0025): when to run `balance_plan`, and its
moves issued through partition reassignment.

A run starts by itself when `balancer.enable` is on and the plan has data to move for a reason:
a live storage node holds no replica (it just joined), a rack holds two replicas of a partition
that the racks could spread, or the replica-count spread exceeds `balancer.imbalance.threshold`;
or at once on BalanceReplicas (`riverlog cluster balance --execute`), enabled or not. A run
issues one batch (at most `balancer.max.concurrent.moves` partitions copying, counting moves in
progress) through `ReassignmentController.alter`, so every move is the partition's own state in
etcd: fenced, resumed by a new controller, cancellable like any reassignment. It waits until no
reassignment is in progress, elects the preferred leaders its reorders named, plans again, and
stops when the plan is empty. Only "a run is under way" is in memory: a new controller resumes
the moves, and starts a new run by itself when the balancer is enabled.

While a partition moves, its topic's `leader/follower.replication.throttled.replicas` name its
current and adding replicas (`throttled_replicas`); the entries go once it stops moving. A new
controller adopts every such entry, so none outlives its move after a failover. The nodes of
its moves get `balancer.replication.throttled.rate` as their throttled rates while a move of
the balancer involves them, unless an operator set a rate (`balance_throttle`); the rates go
once no move involves the node, and a new controller adopts them too. Partition
sizes come from the storage nodes' heartbeats (`replica_sizes`). Nodes being drained
(`MetadataImage.draining`) are handed to the planner as such: it moves nothing onto them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.node_config import rate_configs
from riverlog.common.types import TopicPartition

from ..config import MetadataConfig
from ..image import MetadataImage
from . import balance_throttle as rates
from . import reassignment as steps
from . import throttled_replicas as throttle
from .background import cancel_all, wait_woken
from .balance_plan import (
    BalanceMove,
    BalancePlan,
    BalancerNode,
    BalancerPartition,
    plan_balance,
    spread_of,
    start_reason,
)
from .node_configs import NodeConfigController
from .reassignments import ReassignmentController, ReassignmentItem
from .replica_sizes import ReplicaSizeBook
from .replication import ReplicationController
from .topic_validation import ConfigOp
from .topics import TopicController

log = logging.getLogger(__name__)

CHECK_S = 5.0
_SETTLE_S = 0.5
UNLIMITED = 1_000_000


class ReplicaBalancer:
    """The active controller's balancer (idle on standbys). Lifecycle: `start()`, `await
    stop()`; runs on the event loop that started it."""

    def __init__(
        self,
        replication: ReplicationController,
        reassignments: ReassignmentController,
        topics: TopicController,
        image: MetadataImage,
        config: MetadataConfig,
        sizes: ReplicaSizeBook | None = None,
        node_configs: NodeConfigController | None = None,
    ) -> None:
        self.replication = replication
        self.node_configs = node_configs
        self.sizes = sizes
        self.reassignments = reassignments
        self.topics = topics
        self.image = image
        self.config = config
        self.running = False
        self._throttled: dict[str, set[int]] = {}
        self._rated: set[int] = set()  # nodes whose throttled rates the balancer set
        self._elect: set[tuple[str, int]] = set()
        self._was_controller = False
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        image.add_listener(self._wake.set)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="controller-balancer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_all([task])

    @property
    def is_controller(self) -> bool:
        return self.replication.election.is_controller

    # --- the planner's view ---------------------------------------------------------------------

    def snapshot(
        self, reported: Mapping[int, Mapping[TopicPartition, int]] | None = None
    ) -> tuple[list[BalancerNode], list[BalancerPartition]]:
        """Live storage nodes and every partition (a moving one at its target). A partition's
        size is the largest its replicas reported (`reported`: node → sizes, from heartbeats);
        unknown when none did, and then the plan balances counts only."""
        cluster = self.image.cluster
        reported = reported or {}
        nodes = [
            BalancerNode(n.node_id, n.rack, draining=n.node_id in self.image.draining)
            for n in cluster.nodes_of_kind("storage")
        ]

        def size(topic: str, replicas: Sequence[int], partition: int) -> int | None:
            tp = TopicPartition(topic, partition)
            known = [reported[r][tp] for r in replicas if tp in reported.get(r, {})]
            return max(known) if known else None

        partitions = []
        for topic in cluster.topics.values():
            for p in topic.partitions:
                moving = steps.is_reassigning(p)
                target = steps.replicas_of(p).target if moving else p.replicas
                partitions.append(
                    BalancerPartition(
                        topic.name,
                        p.partition,
                        target,
                        p.leader,
                        p.isr,
                        size(topic.name, p.replicas, p.partition),
                        moving,
                    )
                )
        return nodes, partitions

    async def reported_sizes(self) -> dict[int, dict[TopicPartition, int]]:
        """What the storage nodes reported; nothing when it cannot be read (counts only)."""
        if self.sizes is None:
            return {}
        try:
            return await self.sizes.read()
        except RiverlogError as exc:
            log.info("balancer: replica sizes unavailable (%s); balancing counts", exc)
            return {}

    async def plan(self, max_moves: int | None = None) -> BalancePlan:
        """The plan of the image of the moment, computed off the event loop (a large cluster
        takes a while; the loop keeps renewing the controller's lease meanwhile)."""
        nodes, partitions = self.snapshot(await self.reported_sizes())
        limit = self.config.balancer_max_concurrent_moves if max_moves is None else max_moves
        return await asyncio.to_thread(plan_balance, nodes, partitions, limit)

    # --- BalanceReplicas ------------------------------------------------------------------------

    async def balance(self, dry_run: bool) -> BalancePlan:
        """The whole plan (every batch); unless `dry_run`, a run starts that issues it."""
        if not self.is_controller:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)
        full = await self.plan(UNLIMITED)
        if not dry_run and full.moves:
            log.info("balancer: run requested (%d partitions to move)", len(full.moves))
            self.running = True
            self._wake.set()
        return full

    # --- the run --------------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            await wait_woken(self._wake, CHECK_S)
            try:
                async with self._lock:
                    await self.step()
            except RiverlogError as exc:
                log.warning("balancer: %s", exc)
            except Exception:
                log.exception("balancer step failed")
            await asyncio.sleep(_SETTLE_S)  # image changes come in bursts during a move

    async def step(self) -> None:
        """One look at the cluster: tidy throttles, wait for moves, plan, issue a batch."""
        if not self.is_controller:
            self._was_controller = self.running = False
            self._throttled.clear()
            self._rated.clear()
            return
        if not self._was_controller:
            self._adopt_throttles()
            self._was_controller = True
        await self._unthrottle_finished()
        await self._unrate_finished()
        if any(
            steps.is_reassigning(p)
            for t in self.image.cluster.topics.values()
            for p in t.partitions
        ):
            return  # a batch (or an operator's move) is under way: wait for it
        if self._elect:
            wanted, self._elect = sorted(self._elect), set()
            await self.replication.elect_leaders(True, wanted)
        if not self.running:
            reason = None
            if self.config.balancer_enable:
                spread = spread_of(*self.snapshot())
                reason = start_reason(spread, self.config.balancer_imbalance_threshold)
            if reason is None:
                return
            plan = await self.plan()
            if not any(m.copies_data for m in plan.moves):
                return  # the spread cannot be improved (racks, unmovable partitions)
            log.info("balancer: starting: %s", reason)
            self.running = True
        else:
            plan = await self.plan()
        if not plan.moves:
            log.info(
                "balancer: balanced (replica spread %d, leader spread %d)",
                plan.before.replica_spread,
                plan.before.leader_spread,
            )
            self.running = False
            return
        await self._issue(plan.moves)

    async def _issue(self, planned: Sequence[BalanceMove]) -> None:
        topics = self.image.cluster.topics
        moving = {
            (t.name, p.partition)
            for t in topics.values()
            for p in t.partitions
            if steps.is_reassigning(p)
        }
        # planned off the loop: a partition an operator started moving meanwhile is left alone
        moves = [m for m in planned if (m.topic, m.partition) not in moving]
        if not moves:
            return
        await self._throttle([m for m in moves if m.copies_data])
        items = [ReassignmentItem(m.topic, m.partition, m.target) for m in moves]
        results = await self.reassignments.alter(items)
        failed = [r for r in results if r.error_code != ErrorCode.NONE]
        for r in failed:
            log.warning("balancer: %s-%d not moved: %s", r.topic, r.partition, r.error_message)
        if len(failed) == len(results):
            log.warning("balancer: no move of the batch was accepted; stopping the run")
            self.running = False
        ok = {(r.topic, r.partition) for r in results if r.error_code == ErrorCode.NONE}
        self._elect.update((m.topic, m.partition) for m in moves if (m.topic, m.partition) in ok)
        log.info(
            "balancer: issued %d moves: %s",
            len(ok),
            ", ".join(
                f"{m.topic}-{m.partition} {list(m.current)}->{list(m.target)}" for m in moves
            ),
        )

    # --- throttled replicas ---------------------------------------------------------------------

    async def _throttle(self, moves: Sequence[BalanceMove]) -> None:
        """Mark the moves' replicas in their topics' throttled-replicas configs."""
        by_topic: dict[str, list[BalanceMove]] = {}
        for m in moves:
            by_topic.setdefault(m.topic, []).append(m)
        changes: list[tuple[str, list[ConfigOp]]] = []
        for topic, topic_moves in sorted(by_topic.items()):
            info = self.image.cluster.topics.get(topic)
            if info is None:
                continue
            ops = []
            for key in throttle.KEYS:
                entries = [
                    e
                    for m in topic_moves
                    for e in throttle.for_move(m.partition, m.current, m.target)[key]
                ]
                if entries:
                    value = throttle.with_entries(info.configs.get(key), entries)
                    ops.append(ConfigOp(key, value, "SET"))
            changes.append((topic, ops))
            self._throttled.setdefault(topic, set()).update(m.partition for m in topic_moves)
        await self._alter(changes)
        rate = self.config.balancer_replication_throttled_rate
        involved = {r for m in moves for r in (*m.current, *m.target)}
        nodes = rates.nodes_to_rate(involved, self.image.cluster.node_configs, self._rated, rate)
        self._rated.update(await self._alter_rates(nodes, rate))

    def _adopt_throttles(self) -> None:
        """A new controller takes over every throttled-replicas entry (the last one may have
        died before removing them)."""
        for info in self.image.cluster.topics.values():
            marked = set().union(
                *(throttle.throttled_partitions(info.configs.get(k)) for k in throttle.KEYS)
            )
            if marked:
                self._throttled.setdefault(info.name, set()).update(marked)
        rate = self.config.balancer_replication_throttled_rate
        self._rated |= rates.adopted_nodes(self.image.cluster.node_configs, rate)

    async def _unrate_finished(self) -> None:
        """Remove the rates of nodes no move of the balancer involves any more (kept for the
        next step when the write fails); forget those an operator changed meanwhile."""
        if not self._rated:
            return
        involved = {
            r
            for topic, partitions in self._throttled.items()
            if (info := self.image.cluster.topics.get(topic)) is not None
            for p in info.partitions
            if p.partition in partitions and steps.is_reassigning(p)
            for r in p.replicas
        }
        clear, forget = rates.nodes_to_clear(
            self._rated,
            involved,
            self.image.cluster.node_configs,
            self.config.balancer_replication_throttled_rate,
        )
        self._rated -= set(forget) | await self._alter_rates(clear, None)

    async def _alter_rates(self, nodes: Sequence[int], rate: int | None) -> set[int]:
        """Set (or remove, None) the throttled rates of `nodes`; the nodes written."""
        if not nodes or self.node_configs is None:
            return set()
        changes = [
            (
                str(node),
                [
                    ConfigOp(k, "", "DELETE") if v is None else ConfigOp(k, str(v), "SET")
                    for k, v in configs.items()
                ],
            )
            for node, configs in rate_configs(nodes, rate).items()
        ]
        written: set[int] = set()
        for r in await self.node_configs.alter(changes):
            if r.error_code == ErrorCode.NONE:
                written.add(int(r.name))
            else:
                log.warning("balancer: throttled rates of node %s: %s", r.name, r.error_message)
        if written:
            log.info(
                "balancer: throttled rates %s on nodes %s",
                "removed" if rate is None else f"set to {rate} B/s",
                ",".join(map(str, sorted(written))),
            )
        return written

    async def _unthrottle_finished(self) -> None:
        """Remove the entries of partitions that no longer move (kept for the next step when
        the write fails)."""
        changes: list[tuple[str, list[ConfigOp]]] = []
        cleared: dict[str, set[int]] = {}
        for topic, partitions in sorted(self._throttled.items()):
            info = self.image.cluster.topics.get(topic)
            if info is None:
                del self._throttled[topic]
                continue
            moving = {p.partition for p in info.partitions if steps.is_reassigning(p)}
            done = partitions - moving
            if not done:
                continue
            ops = []
            for key in throttle.KEYS:
                value = info.configs.get(key)
                if value is None:
                    continue
                left = throttle.without_partitions(value, done)
                if left != value:
                    ops.append(ConfigOp(key, left or "", "SET" if left else "DELETE"))
            if ops:
                changes.append((topic, ops))
            cleared[topic] = done
        failed = await self._alter(changes)
        for topic, done in cleared.items():
            if topic in failed:
                continue
            remaining = self._throttled[topic] - done
            if remaining:
                self._throttled[topic] = remaining
            else:
                del self._throttled[topic]

    async def _alter(self, changes: Sequence[tuple[str, Sequence[ConfigOp]]]) -> set[str]:
        """Write the config changes; the topics whose write failed."""
        changes = [(t, ops) for t, ops in changes if ops]
        if not changes:
            return set()
        failed: set[str] = set()
        for r in await self.topics.alter_configs(changes):
            if r.error_code != ErrorCode.NONE:
                failed.add(r.name)
                log.warning("balancer: throttle configs of %s: %s", r.name, r.error_message)
        return failed
