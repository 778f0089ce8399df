"""One partition replica hosted by this node: its log, its role (leader or follower) at a leader
epoch, and the high watermark the leader computes from the in-sync replicas' log end offsets.

Kafka's `Partition`: the controller decides leadership (it arrives here through the cluster
image), the replica enforces it. Requests name the epoch they believe current; an older one is
fenced (FENCED_LEADER_EPOCH), a newer one means this node has not seen the change yet
(UNKNOWN_LEADER_EPOCH). This module holds the replica's state, its leadership, the data path
(append, read, delete records) and the follower's side of replication (append fetched batches,
truncate). The leader's side, tracking the followers from their fetches, keeping the ISR and
moving the high watermark, is its `replication` member (`LeaderReplication`, in
`leader_replication.py`; the
pure rules are in `isr.py`). A leader that may not lead (`may_lead()` false: its membership
lapsed, see the storage node's self-fencing) refuses produce with NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.cluster.image import PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import IsolationLevel, TopicPartition

from ..log import AppendInfo, AppendOrigin, FetchSlice, LogConfig, PartitionLog
from ..log.txn_index import AbortedTxn
from ..producer import ProducerStateManager
from ..producer.manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from ..producer.verification import VerificationGuard
from .isr import AlterIsrRequest
from .leader_replication import LeaderReplication
from .role import NO_LEADER, Role

__all__ = ["DEFAULT_REPLICA_LAG_TIME_MAX_MS", "NO_LEADER", "Partition", "ReadResult", "Role"]

log = logging.getLogger(__name__)

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A read and the offsets as they were at the moment of the read; under read_committed,
    the aborted transactions that meet the records (None under read_uncommitted)."""

    records: FetchSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    aborted: list[AbortedTxn] | None = None


class Partition:
    """One hosted replica. Created by the ReplicaManager from the image; used only on the
    event-loop thread. `on_change(tp)` is called whenever something a waiting request may care
    about moved (the high watermark, the role, the epoch, the log start offset). The leader's
    follower and ISR state is its `replication` member."""

    def __init__(
        self,
        tp: TopicPartition,
        topic_id: str,
        partition_log: PartitionLog,
        node_id: int,
        on_change: Callable[[TopicPartition], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        alter_isr: Callable[[AlterIsrRequest], None] | None = None,
        may_lead: Callable[[], bool] | None = None,
    ) -> None:
        """`alter_isr(request)` sends an ISR change to the controller (its answer comes back
        through `replication.on_alter_isr_result`); `may_lead()` says whether this node may
        take writes."""
        self.tp = tp
        self.topic_id = topic_id
        self.log = partition_log
        # Idempotence: producer id -> epoch and last batches, loaded from snapshot + log.
        self.producer_state = ProducerStateManager(
            partition_log, clock, producer_id_expiration_ms=producer_id_expiration_ms
        )
        self.node_id = node_id
        self._on_change = on_change
        self.role = Role.OFFLINE
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.partition_epoch = -1
        self.clock = clock
        self._may_lead = may_lead
        self.replication = LeaderReplication(
            self,
            on_change,
            clock=clock,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            alter_isr=alter_isr,
            may_lead=may_lead,
        )

    def __repr__(self) -> str:
        return f"Partition({self.tp}, {self.role.value}, epoch={self.leader_epoch})"

    # --- leadership ---------------------------------------------------------------------------

    def apply_state(self, info: PartitionInfo) -> bool:
        """Take the controller's view of this partition; returns whether anything changed. An
        older leader epoch than the one held is ignored (a stale image)."""
        if info.leader_epoch < self.leader_epoch:
            log.warning(
                "%s: ignoring stale leader epoch %d < %d",
                self.tp,
                info.leader_epoch,
                self.leader_epoch,
            )
            return False
        if info.leader == self.node_id:
            role = Role.LEADER
        elif info.leader == NO_LEADER:
            role = Role.OFFLINE
        else:
            role = Role.FOLLOWER
        new_epoch = (role, info.leader, info.leader_epoch) != (
            self.role,
            self.leader_id,
            self.leader_epoch,
        )
        newer_isr = info.partition_epoch > self.partition_epoch or new_epoch
        changed = new_epoch or info.replicas != self.replicas or newer_isr
        if not changed:
            return False
        if role is not self.role:
            log.info(
                "%s: %s -> %s at epoch %d", self.tp, self.role.value, role.value, info.leader_epoch
            )
        self.role = role
        self.leader_id = info.leader
        self.leader_epoch = info.leader_epoch
        self.replicas = info.replicas
        if newer_isr:
            self.partition_epoch = info.partition_epoch
        if new_epoch:
            self.replication.on_new_epoch(info.isr, info.partition_epoch)
        elif newer_isr:
            self.replication.on_image_isr(info.isr, info.partition_epoch)
        if role is Role.LEADER:
            self.replication.maybe_increment_high_watermark()
        self._on_change(self.tp)
        return True

    def check_epoch(self, current_leader_epoch: int | None) -> None:
        """Raise when the caller's epoch is not ours (None: the caller does not check)."""
        if current_leader_epoch is None or current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise RiverlogError(
                f"{self.tp}: leader epoch {current_leader_epoch} is older than {self.leader_epoch}",
                ErrorCode.FENCED_LEADER_EPOCH,
            )
        if current_leader_epoch > self.leader_epoch:
            raise RiverlogError(
                f"{self.tp}: leader epoch {current_leader_epoch} is newer than "
                f"{self.leader_epoch} known here",
                ErrorCode.UNKNOWN_LEADER_EPOCH,
            )

    def check_may_take_writes(self) -> None:
        """A produce's check after `require_leader`: this node may take writes now."""
        if self._may_lead is not None and not self._may_lead():
            raise RiverlogError(
                f"{self.tp}: node {self.node_id} is fenced from the cluster (its membership "
                "lapsed) until it has re-registered and seen a newer cluster image",
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
            )

    def require_leader(self, current_leader_epoch: int | None) -> None:
        self.check_epoch(current_leader_epoch)
        if self.role is not Role.LEADER:
            leader = f"node {self.leader_id}" if self.leader_id != NO_LEADER else "no node"
            raise RiverlogError(
                f"{self.tp}: this node is not the leader ({leader} is, epoch {self.leader_epoch})",
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
            )

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def stop(self) -> None:
        """No longer a replica here (its topic deleted, or reassigned away): offline, so a
        request waiting on it (an acks=all produce in the purgatory) hears at once that
        leadership moved instead of waiting out its timeout."""
        self.role = Role.OFFLINE

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (kept by `replication`)."""
        return self.replication.isr

    # --- data ---------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The LSO: read_committed readers read below it. min(first unstable offset, high
        watermark), never below the log start (Kafka's UnifiedLog.lastStableOffset); the same
        on followers, which replay the same batches."""
        hw = self.log.high_watermark
        return max(self.log.log_start_offset, self.producer_state.last_stable_offset(hw))

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet stable, or None."""
        return self.producer_state.first_unstable_offset(self.log.high_watermark)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def config(self) -> LogConfig:
        return self.log.config

    def append_as_leader(
        self,
        records: bytes | memoryview,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        *,
        verify: bool = False,
        guard: VerificationGuard | None = None,
    ) -> AppendInfo:
        """Validate and append one produce payload (or, from the transaction coordinator, a
        marker) at our epoch; moves the high watermark. Raises RiverlogError with nothing
        written when the payload is bad. With `verify` (KIP-890), a transactional batch with no
        transaction open here needs `guard`, still current, from a successful verification."""
        check = self.producer_state.check_leader_append(records)
        if verify:
            self.producer_state.check_verified(check, guard)
        if check.duplicate is not None:  # a retry: the offsets of the first write
            return self.producer_state.duplicate_info(check.duplicate)
        info = self.log.append_as_leader(records, self.leader_epoch, origin)
        self.producer_state.on_leader_append(check, info)
        if not self.replication.maybe_increment_high_watermark():
            self._on_change(self.tp)  # wake the followers' long polls (Kafka's tryComplete)
        return info

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        min_one_message: bool,
        up_to_high_watermark: bool = True,
        isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> ReadResult:
        """Whole batches from `fetch_offset`: consumers see only up to the high watermark
        (read_uncommitted) or the last stable offset (read_committed, with the aborted
        transactions that meet the records: Kafka's collectAbortedTransactions up to the end
        of the data returned), followers up to the log end offset. Raises
        OFFSET_OUT_OF_RANGE."""
        hw = self.log.high_watermark
        lso = self.last_stable_offset
        committed = up_to_high_watermark and isolation is IsolationLevel.READ_COMMITTED
        max_offset = (lso if committed else hw) if up_to_high_watermark else None
        records = self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
        )
        aborted: list[AbortedTxn] | None = None
        if committed:
            aborted = []
            if records.size and records.next_offset > fetch_offset:
                aborted = self.log.collect_aborted_txns(fetch_offset, records.next_offset)
        return ReadResult(
            records, hw, self.log.log_start_offset, self.log.log_end_offset, lso, aborted
        )

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to `offset` (-1: the high watermark, or the first
        unstable offset if lower); returns the new low watermark. Only the committed part of a
        log can be deleted, and never an open transaction's first offset (Kafka bounds by the
        high watermark only; decision 0029)."""
        hw = self.log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise RiverlogError(
                f"{self.tp}: cannot delete records before {offset}: the high watermark is {hw}",
                ErrorCode.OFFSET_OUT_OF_RANGE,
            )
        unstable = self.first_unstable_offset()
        if unstable is not None and target > unstable:
            if offset != -1:
                raise RiverlogError(
                    f"{self.tp}: cannot delete records before {offset}: a transaction is open "
                    f"from offset {unstable} (delete up to it, or end the transaction first)",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            target = unstable
        low = self.log.delete_records(target)
        self._on_change(self.tp)
        return low

    def update_config(self, config: LogConfig) -> None:
        if config != self.log.config:
            self.log.update_config(config)

    # --- replication (follower side) ---------------------------------------------------------

    def append_as_follower(
        self, records: bytes | memoryview, leader_high_watermark: int
    ) -> AppendInfo | None:
        """Append fetched batches unchanged, then take the leader's high watermark (capped by
        our log end offset). Returns None when `records` is empty."""
        info = self.log.append_as_follower(records) if records else None
        if info is not None:
            self.producer_state.on_follower_append(records)
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._on_change(self.tp)

    def truncate_to(self, offset: int) -> None:
        """Remove what diverged from the leader (follower only)."""
        if offset < self.log.log_end_offset:
            log.info(
                "%s: truncating from %d to %d (epoch %d)",
                self.tp,
                self.log.log_end_offset,
                offset,
                self.leader_epoch,
            )
            self.log.truncate_to(offset)
            self.producer_state.truncate_to(offset)
            self._on_change(self.tp)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Start the log afresh at `offset` (a follower below the leader's log start)."""
        log.warning("%s: restarting the log at the leader's log start %d", self.tp, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.producer_state.truncate_fully_and_start_at(offset)
        self._on_change(self.tp)
