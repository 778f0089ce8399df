"""One partition replica hosted by this node: its log, its role (leader or follower) at a leader
epoch, and the high watermark the leader computes from the in-sync replicas' log end offsets.

Kafka's `Partition`: the controller decides leadership (it arrives here through the cluster
image), the replica enforces it. Requests name the epoch they believe current; an older one is
fenced (FENCED_LEADER_EPOCH), a newer one means this node has not seen the change yet
(UNKNOWN_LEADER_EPOCH). The high watermark is the minimum log end offset over the ISR; with
replication factor 1 the ISR is the leader alone and the high watermark follows every append.
Follower replication slots in through `update_follower_fetch_state`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from riverlog.common.cluster import PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..log import AppendInfo, FetchSlice, LogConfig, PartitionLog
from ..producer import ProducerStateManager

log = logging.getLogger(__name__)

NO_LEADER = -1


class Role(enum.Enum):
    """This node's part in a partition, computed from the image's leader and replicas."""

    LEADER = "leader"
    """action: takes appends, serves fetches, moves the high watermark.
    transition: to FOLLOWER or OFFLINE when an image with a newer epoch names another leader."""
    FOLLOWER = "follower"
    """action: (with replication) pulls from the leader; refuses produce and consumer fetch.
    transition: to LEADER when an image names this node leader at a newer epoch."""
    OFFLINE = "offline"
    """action: refuses everything with NOT_LEADER_OR_FOLLOWER (the partition has no leader).
    transition: to LEADER or FOLLOWER when a leader is elected."""


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A read and the offsets as they were at the moment of the read."""

    records: FetchSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class Partition:
    """One hosted replica. Created by the ReplicaManager from the image; used only on the
    event-loop thread. `on_change(tp)` is called whenever something a waiting request may care
    about moved (the high watermark, the role, the epoch, the log start offset)."""

    def __init__(
        self,
        tp: TopicPartition,
        topic_id: str,
        partition_log: PartitionLog,
        node_id: int,
        on_change: Callable[[TopicPartition], None],
        follower_replication: bool = False,
    ) -> None:
        """`follower_replication`: whether followers fetch from this leader. Until the
        follower fetcher exists none does, so the leader alone is the ISR it waits on (a
        replication-factor-3 topic is then served, unreplicated, as if it had one replica:
        what Kafka's ISR shrink would also come to once the followers fell behind)."""
        self.tp = tp
        self.topic_id = topic_id
        self.log = partition_log
        # Idempotence: producer id -> epoch and last batches, loaded from snapshot + log.
        self.producer_state = ProducerStateManager(partition_log)
        self.node_id = node_id
        self._on_change = on_change
        self.role = Role.OFFLINE
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # Follower node id -> its log end offset, as its last fetch told (replication).
        self._follower_leo: dict[int, int] = {}
        self.follower_replication = follower_replication

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
        changed = (role, info.leader, info.leader_epoch, info.replicas, info.isr) != (
            self.role,
            self.leader_id,
            self.leader_epoch,
            self.replicas,
            self.isr,
        )
        if not changed:
            return False
        if role is not self.role:
            log.info(
                "%s: %s -> %s at epoch %d", self.tp, self.role.value, role.value, info.leader_epoch
            )
        if role is Role.LEADER and self.role is not Role.LEADER:
            self._follower_leo.clear()
        self.role = role
        self.leader_id = info.leader
        self.leader_epoch = info.leader_epoch
        self.replicas = info.replicas
        self.isr = info.isr
        if role is Role.LEADER:
            self._maybe_increment_high_watermark()
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

    # --- data ---------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def config(self) -> LogConfig:
        return self.log.config

    def check_min_isr(self) -> None:
        """acks=all needs min.insync.replicas in the ISR before appending (Kafka's check)."""
        in_sync = len(self.isr) if self.isr and self.follower_replication else 1
        if in_sync < self.config.min_insync_replicas:
            raise RiverlogError(
                f"{self.tp}: {in_sync} in-sync replicas, min.insync.replicas is "
                f"{self.config.min_insync_replicas}",
                ErrorCode.NOT_ENOUGH_REPLICAS,
            )

    def append_as_leader(self, records: bytes) -> AppendInfo:
        """Validate and append one produce payload at our epoch; moves the high watermark.
        Raises RiverlogError with nothing written when the payload is bad."""
        check = self.producer_state.check_leader_append(records)
        if check.duplicate is not None:  # a retry: the offsets of the first write
            return self.producer_state.duplicate_info(check.duplicate)
        info = self.log.append_as_leader(records, self.leader_epoch)
        self.producer_state.on_leader_append(check, info)
        self._maybe_increment_high_watermark()
        return info

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        min_one_message: bool,
        up_to_high_watermark: bool = True,
    ) -> ReadResult:
        """Whole batches from `fetch_offset`: consumers see only up to the high watermark,
        followers up to the log end offset. Raises OFFSET_OUT_OF_RANGE."""
        hw = self.log.high_watermark
        records = self.log.read(
            fetch_offset,
            max_bytes,
            max_offset=hw if up_to_high_watermark else None,
            min_one_message=min_one_message,
        )
        return ReadResult(records, hw, self.log.log_start_offset, self.log.log_end_offset)

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to `offset` (-1: the high watermark); returns the new
        low watermark. Only the committed part of a log can be deleted."""
        hw = self.log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise RiverlogError(
                f"{self.tp}: cannot delete records before {offset}: the high watermark is {hw}",
                ErrorCode.OFFSET_OUT_OF_RANGE,
            )
        low = self.log.delete_records(target)
        self._on_change(self.tp)
        return low

    def update_config(self, config: LogConfig) -> None:
        if config != self.log.config:
            self.log.update_config(config)

    # --- replication hooks --------------------------------------------------------------------

    def update_follower_fetch_state(self, follower_id: int, log_end_offset: int) -> None:
        """A follower fetched from `log_end_offset`: it holds everything below it."""
        self._follower_leo[follower_id] = log_end_offset
        self._maybe_increment_high_watermark()

    def _isr_log_end_offsets(self) -> Mapping[int, int]:
        leos = {self.node_id: self.log.log_end_offset}
        if not self.follower_replication:
            return leos
        for replica in self.isr:
            if replica != self.node_id:
                leos[replica] = self._follower_leo.get(replica, -1)
        return leos

    def _maybe_increment_high_watermark(self) -> None:
        if self.role is not Role.LEADER:
            return
        new_hw = min(self._isr_log_end_offsets().values())
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self._on_change(self.tp)
