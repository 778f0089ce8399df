"""Helpers for the replica-layer tests: cluster images built by hand, valid batches from the
shared codec, and a storage node's domain objects (log manager, replica manager, handlers)
over a temporary log directory, with no process and no network."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, PartitionInfo, TopicInfo
from riverlog.common.records import BatchBuilder
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import LogConfig, LogManager
from riverlog.services.storage.replica.fetch import FetchHandler
from riverlog.services.storage.replica.isr import AlterIsrRequest
from riverlog.services.storage.replica.offsets import OffsetsHandler
from riverlog.services.storage.replica.produce import ProduceHandler
from riverlog.services.storage.replica.purgatory import Purgatory
from riverlog.services.storage.replica.replica_manager import ReplicaManager
from riverlog.services.storage.replica.requests import (
    Acks,
    FetchParams,
    FetchPartitionData,
    ProduceParams,
    ProducePartitionData,
)

NODE = 1
OTHER = 2
TS = 1_700_000_000_000


def make_batch(count: int = 1, ts: int = TS, value_size: int = 20, tag: int = 0) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(ts + i, b"k%05d-%05d" % (tag, i), bytes([65 + (tag + i) % 26]) * value_size)
    return builder.build()


def topic(
    name: str,
    leaders: Sequence[int] = (NODE,),
    epoch: int = 0,
    topic_id: str | None = None,
    configs: Mapping[str, str] | None = None,
    replicas: Sequence[Sequence[int]] | None = None,
    isr: Sequence[Sequence[int]] | None = None,
    partition_epoch: int = 0,
) -> TopicInfo:
    """A topic whose partition i is led by leaders[i] (replicas: the leader alone, or given)."""
    parts = tuple(
        PartitionInfo(
            partition=i,
            leader=leader,
            leader_epoch=epoch,
            replicas=tuple(replicas[i]) if replicas else ((leader,) if leader >= 0 else (NODE,)),
            isr=(
                tuple(isr[i])
                if isr
                else tuple(replicas[i])
                if replicas
                else ((leader,) if leader >= 0 else ())
            ),
            partition_epoch=partition_epoch,
        )
        for i, leader in enumerate(leaders)
    )
    return TopicInfo(
        name=name,
        topic_id=topic_id or f"id-{name}",
        partitions=parts,
        configs=MappingProxyType(dict(configs or {})),
    )


def image(*topics: TopicInfo, version: int = 1) -> ClusterImage:
    return ClusterImage(version=version, topics=MappingProxyType({t.name: t for t in topics}))


@dataclass
class Node:
    """The domain objects of one storage node."""

    root: Path
    clock: ManualClock
    log_manager: LogManager
    purgatory: Purgatory[TopicPartition]
    replicas: ReplicaManager
    produce: ProduceHandler
    fetch: FetchHandler
    offsets: OffsetsHandler

    def close(self) -> None:
        self.replicas.close()
        self.log_manager.close()


def make_node(
    root: Path,
    clock: ManualClock | None = None,
    fetch_max_bytes: int = 50 << 20,
    *,
    node_id: int = NODE,
    replica_lag_time_max_ms: int = 30_000,
    alter_isr: Callable[[AlterIsrRequest], None] | None = None,
    may_lead: Callable[[], bool] | None = None,
) -> Node:
    clock = clock or ManualClock(TS)
    log_manager = LogManager([root], clock, LogConfig())
    purgatory: Purgatory[TopicPartition] = Purgatory()
    replicas = ReplicaManager(
        node_id,
        log_manager,
        LogConfig(),
        purgatory,
        clock=clock,
        replica_lag_time_max_ms=replica_lag_time_max_ms,
        alter_isr=alter_isr,
        may_lead=may_lead,
    )
    return Node(
        root,
        clock,
        log_manager,
        purgatory,
        replicas,
        ProduceHandler(replicas, purgatory),
        FetchHandler(replicas, purgatory, fetch_max_bytes),
        OffsetsHandler(replicas, [root]),
    )


def produce_params(
    *parts: tuple[TopicPartition, bytes],
    acks: Acks | None = Acks.LEADER,
    epoch: int | None = None,
    timeout_ms: int = 5_000,
) -> ProduceParams:
    return ProduceParams(
        acks=acks,
        timeout_ms=timeout_ms,
        partitions=[ProducePartitionData(tp, records, epoch) for tp, records in parts],
    )


def fetch_params(
    *parts: tuple[TopicPartition, int],
    max_bytes: int = 0,
    partition_max_bytes: int = 0,
    min_bytes: int = 0,
    max_wait_ms: int = 0,
    epoch: int | None = None,
    replica_id: int | None = None,
) -> FetchParams:
    return FetchParams(
        partitions=[
            FetchPartitionData(tp, offset, partition_max_bytes, epoch) for tp, offset in parts
        ],
        max_bytes=max_bytes,
        min_bytes=min_bytes,
        max_wait_ms=max_wait_ms,
        replica_id=replica_id,
    )
