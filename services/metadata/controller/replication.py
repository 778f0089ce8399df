"""Leadership and ISR on the controller: AlterPartition from partition leaders, elections when
storage nodes die, restart or come back, ElectLeaders, and the automatic leader rebalance.

The decisions are the pure functions of `elections` and `alter_partition`; this module runs
them against the image and writes the results. Every write is a fenced controller transaction
(`ControllerElection.write`) that also compares each partition key's mod revision with the
one the decision was based on, so a decision made on a stale image, or by a controller deposed
meanwhile, cannot land. A batch is cut into transactions of `PARTITIONS_PER_TXN` partitions
(etcd allows 128 operations per transaction by default; each partition costs one compare and
one put).

One task (`_reconcile_loop`) reacts to the storage nodes changing (joining, leaving,
restarting, reporting replicas on offline log dirs: decision 0022) and to this instance
becoming the controller; partition writes of every kind take `_writes` in turn, so two
decisions never race on one instance. Lifecycle: `start()` after the election started,
`await stop()`. Metrics: OpenTelemetry counters `riverlog.controller.leader_elections` and
`riverlog.controller.isr_changes` (attribute `change`: shrink or expand) and gauges
`riverlog.controller.offline_partitions` / `under_replicated_partitions` (all no-ops unless a
MeterProvider is installed); DescribeCluster carries the same counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable, Sequence

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from riverlog.common.errors import ErrorCode, RiverlogError

from ..config import MetadataConfig
from ..image import MetadataImage
from ..records import partition_encode
from ..store import Compare, Op
from .alter_partition import AlterPartitionItem, AlterPartitionOutcome, check_alter_partition
from .background import cancel_all
from .election import ControllerElection
from .elections import (
    ElectionResult,
    PartitionUpdate,
    elect_preferred,
    elect_unclean,
    imbalanced,
    reconcile,
)
from .partition_change import OfflineReplicas, offline_by_partition

log = logging.getLogger(__name__)

PARTITIONS_PER_TXN = 100  # + 1 fence compare: within etcd's default --max-txn-ops of 128
SAFETY_RECONCILE_S = 10.0
_RETRIES = 5

_meter = metrics.get_meter("riverlog.services.metadata")
_elections_counter = _meter.create_counter(
    "riverlog.controller.leader_elections", description="partition leader changes written"
)
_isr_counter = _meter.create_counter(
    "riverlog.controller.isr_changes", description="partition ISR changes written"
)


def chunks(updates: Sequence[PartitionUpdate], size: int) -> list[Sequence[PartitionUpdate]]:
    """`updates` cut into transactions of at most `size` partitions."""
    return [updates[i : i + size] for i in range(0, len(updates), size)]


def encode_incarnations(incarnations: dict[int, int]) -> bytes:
    return json.dumps({str(k): v for k, v in sorted(incarnations.items())}).encode()


def decode_incarnations(raw: bytes) -> dict[int, int] | None:
    try:
        return {int(k): int(v) for k, v in dict(json.loads(raw)).items()}
    except (ValueError, TypeError, AttributeError):
        log.error("ignoring a malformed storage incarnations record: %r", raw[:80])
        return None


class ReplicationController:
    """Partition leadership and ISR writes of the active controller (idle on standbys). Runs
    on the event loop; its handlers are called from RPC tasks."""

    def __init__(
        self, election: ControllerElection, image: MetadataImage, config: MetadataConfig
    ) -> None:
        self.election = election
        self.image = image
        self.config = config
        self.keys = image.keys
        self.leader_elections = 0
        self.isr_changes = 0
        self._writes = asyncio.Lock()
        self._wake = asyncio.Event()
        self._incarnations: dict[int, int] = {}
        self._offline: OfflineReplicas = {}  # the offline replicas the last pass acted on
        self._persisted: dict[int, int] | None = None  # as in etcd; None: not read yet
        self._was_controller = False
        self._last_pass = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        image.add_listener(self._on_image)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        _meter.create_observable_gauge(
            "riverlog.controller.offline_partitions",
            callbacks=[self._observe_offline],
            description="partitions with no leader (reported by the active controller)",
        )
        _meter.create_observable_gauge(
            "riverlog.controller.under_replicated_partitions",
            callbacks=[self._observe_under_replicated],
            description="partitions whose ISR is smaller than their replicas",
        )
        self._tasks = [asyncio.create_task(self._reconcile_loop(), name="controller-reconcile")]
        if self.config.auto_leader_rebalance:
            self._tasks.append(
                asyncio.create_task(self._rebalance_loop(), name="controller-rebalance")
            )

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_all(tasks)

    def _partitions(self) -> list[tuple[int, int]]:
        """(ISR size - replica count, leader) of every partition."""
        return [
            (len(p.isr) - len(p.replicas), p.leader)
            for t in self.image.cluster.topics.values()
            for p in t.partitions
        ]

    def _observe_offline(self, _: CallbackOptions) -> Iterable[Observation]:
        if self.election.is_controller:
            yield Observation(sum(1 for _, leader in self._partitions() if leader < 0))

    def _observe_under_replicated(self, _: CallbackOptions) -> Iterable[Observation]:
        if self.election.is_controller:
            yield Observation(sum(1 for gap, _ in self._partitions() if gap < 0))

    def live_storage(self) -> dict[int, int]:
        """Live storage node id → incarnation, from the image."""
        return {n.node_id: n.incarnation for n in self.image.cluster.nodes_of_kind("storage")}

    def offline_replicas(self) -> OfflineReplicas:
        """Replicas on log dirs their live storage node reported offline (decision 0022)."""
        return offline_by_partition(self.image.cluster.nodes_of_kind("storage"))

    def _on_image(self) -> None:
        if self.election.is_controller and (
            self.live_storage() != self._incarnations or self.offline_replicas() != self._offline
        ):
            self._wake.set()

    # --- writing ------------------------------------------------------------------------------

    async def _write(self, updates: Sequence[PartitionUpdate]) -> list[PartitionUpdate]:
        """Write `updates` in fenced, revision-checked transactions; the ones written. A chunk
        whose partitions changed meanwhile is skipped (its callers decide again)."""
        written: list[PartitionUpdate] = []
        for chunk in chunks(updates, PARTITIONS_PER_TXN):
            compares: list[Compare] = []
            ops: list[Op] = []
            for u in chunk:
                key = self.keys.partition(u.topic, u.after.partition)
                compares.append(Compare(key, self.image.revisions.get(key, 0)))
                ops.append(Op(key, partition_encode(u.after)))
            if await self.election.write(compares, ops) is None:
                log.info(
                    "%d partition changes raced with another change; deciding again", len(chunk)
                )
                continue
            written.extend(chunk)
        self._count(written)
        return written

    def count_written(self, written: Sequence[PartitionUpdate]) -> None:
        """Count partition changes written elsewhere (reassignments) in the same metrics."""
        self._count(written)

    def _count(self, written: Sequence[PartitionUpdate]) -> None:
        elected = sum(1 for u in written if u.elected)
        isr = sum(1 for u in written if u.after.isr != u.before.isr)
        self.leader_elections += elected
        self.isr_changes += isr
        if elected:
            _elections_counter.add(elected)
        for u in written:
            if u.after.isr != u.before.isr:
                grew = len(u.after.isr) > len(u.before.isr)
                _isr_counter.add(1, {"change": "expand" if grew else "shrink"})
            if u.elected:
                log.info(
                    "%s-%d: leader %d → %d (epoch %d), isr %s",
                    u.topic,
                    u.after.partition,
                    u.before.leader,
                    u.after.leader,
                    u.after.leader_epoch,
                    list(u.after.isr),
                )

    # --- reacting to storage nodes ----------------------------------------------------------

    async def reconcile_once(self) -> list[PartitionUpdate]:
        """One pass: elect and shrink for the storage nodes now live; the changes written."""
        async with self._writes:
            live = self.live_storage()
            restarted = [
                node
                for node, incarnation in live.items()
                if self._incarnations.get(node, incarnation) != incarnation
            ]
            offline_replicas = self.offline_replicas()
            updates = reconcile(
                self.image.cluster.topics.values(), live, restarted, offline_replicas
            )
            written = await self._write(updates) if updates else []
            if len(written) == len(updates):
                self._incarnations = live
                self._offline = offline_replicas
                await self._persist_incarnations(live)
            else:
                self._wake.set()  # some partitions changed meanwhile: decide again for them
            offline = sum(1 for u in written if u.offline)
            if written:
                log.info(
                    "reconciled %d partitions with live storage nodes %s (restarted %s, "
                    "offline replicas on %d partitions); %d offline",
                    len(written),
                    sorted(live),
                    restarted,
                    len(offline_replicas),
                    offline,
                )
            return written

    async def _load_incarnations(self) -> None:
        """On taking over: the incarnations the previous controller acted on, so a node
        restarted while no controller was active is still seen as restarted."""
        entry = await self.image.store.get(self.keys.storage_incarnations)
        stored = decode_incarnations(entry.value) if entry is not None else None
        self._persisted = stored
        self._incarnations = stored if stored is not None else self.live_storage()

    async def _persist_incarnations(self, live: dict[int, int]) -> None:
        """Record what this controller acted on (after its partition changes landed: a
        controller dying in between makes its successor decide again, which is harmless)."""
        if live == self._persisted:
            return
        op = Op(self.keys.storage_incarnations, encode_incarnations(live))
        if await self.election.write([], [op]) is not None:
            self._persisted = dict(live)

    async def _reconcile_loop(self) -> None:
        while True:
            is_controller = self.election.is_controller
            if is_controller and not self._was_controller:
                try:
                    await self._load_incarnations()
                except RiverlogError as exc:
                    log.warning("cannot read the storage incarnations: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                self._wake.set()
            self._was_controller = is_controller
            if is_controller and self._wake.is_set():
                self._wake.clear()
                self._last_pass = asyncio.get_running_loop().time()
                try:
                    await self.reconcile_once()
                except RiverlogError as exc:
                    log.warning("reconcile failed: %s", exc)
                    self._wake.set()
                    await asyncio.sleep(0.5)
                except Exception:
                    log.exception("reconcile failed")
                    self._wake.set()
                    await asyncio.sleep(0.5)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._wake.wait()
            now = asyncio.get_running_loop().time()
            if is_controller and now - self._last_pass >= SAFETY_RECONCILE_S:
                # Safety net: a settled image reconciles to nothing, at no cost.
                self._last_pass = now
                self._wake.set()

    # --- AlterPartition -----------------------------------------------------------------------

    def check_sender(self, node_id: int, incarnation: int) -> None:
        """The sender must be a live storage node, of that incarnation when one is given."""
        node = self.image.cluster.storage_node(node_id)
        if node is None or (incarnation and node.incarnation != incarnation):
            raise RiverlogError(
                f"storage node {node_id} (incarnation {incarnation}) is not registered",
                ErrorCode.STALE_BROKER_EPOCH,
            )

    async def alter_partition(
        self, node_id: int, incarnation: int, items: Sequence[AlterPartitionItem]
    ) -> list[AlterPartitionOutcome]:
        """Check and apply each item; one outcome per item, in order."""
        self._require_controller()
        self.check_sender(node_id, incarnation)
        outcomes: dict[int, AlterPartitionOutcome] = {}
        pending = list(range(len(items)))
        async with self._writes:
            for attempt in range(_RETRIES):
                live = self.live_storage()
                offline = self.offline_replicas()
                todo: list[tuple[int, PartitionUpdate]] = []
                for i in pending:
                    outcome = check_alter_partition(
                        items[i], node_id, self.image.cluster.topics, live, offline
                    )
                    outcomes[i] = outcome
                    if outcome.after is not None:
                        before = self.image.cluster.partition(items[i].topic, items[i].partition)
                        assert before is not None
                        todo.append((i, PartitionUpdate(items[i].topic, before, outcome.after)))
                written = await self._write([u for _, u in todo]) if todo else []
                done = {(u.topic, u.after.partition) for u in written}
                pending = [i for i, u in todo if (u.topic, u.after.partition) not in done]
                if not pending:
                    break
                await asyncio.sleep(0.05 * (attempt + 1))  # let the image catch up
        for i in pending:
            outcomes[i] = AlterPartitionOutcome(
                items[i],
                ErrorCode.INVALID_UPDATE_VERSION,
                "the partition keeps changing; read the new state and retry",
                outcomes[i].state,
            )
        return [outcomes[i] for i in range(len(items))]

    # --- ElectLeaders and the rebalance ------------------------------------------------------

    async def elect_leaders(
        self, preferred: bool, partitions: Sequence[tuple[str, int]] | None
    ) -> list[ElectionResult]:
        """ElectLeaders PREFERRED (`preferred`) or UNCLEAN, for `partitions` (None: all)."""
        self._require_controller()
        async with self._writes:
            elect = elect_preferred if preferred else elect_unclean
            updates, results = elect(
                self.image.cluster.topics, self.live_storage(), partitions, self.offline_replicas()
            )
            written = await self._write(updates) if updates else []
        landed = {(u.topic, u.after.partition) for u in written}
        out: list[ElectionResult] = []
        for r in results:
            if r.error_code == ErrorCode.NONE and (r.topic, r.partition) not in landed:
                r = ElectionResult(
                    r.topic,
                    r.partition,
                    ErrorCode.NOT_CONTROLLER
                    if not self.election.is_controller
                    else ErrorCode.INVALID_UPDATE_VERSION,
                    "the partition changed during the election; retry",
                )
            out.append(r)
        return out

    async def rebalance_once(self) -> list[ElectionResult]:
        """One automatic rebalance check: preferred elections where a node is imbalanced."""
        moves = imbalanced(
            self.image.cluster.topics.values(),
            self.live_storage(),
            self.config.leader_imbalance_per_broker_percentage,
        )
        if not moves:
            return []
        log.info("leader imbalance: electing preferred leaders for %d partitions", len(moves))
        return await self.elect_leaders(True, moves)

    async def _rebalance_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_s)
            if not self.election.is_controller:
                continue
            try:
                await self.rebalance_once()
            except RiverlogError as exc:
                log.warning("leader rebalance failed: %s", exc)
            except Exception:
                log.exception("leader rebalance failed")

    def _require_controller(self) -> None:
        if not self.election.is_controller:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)
