"""Produce on the leader: append each partition's batches, then answer per `acks`.

Two phases, so a stream can keep appends in arrival order while acknowledgements complete on
their own: `append()` validates and writes every partition now (synchronously, on the event
loop: one `pwrite` per partition), `complete()` waits, for `acks=all` only, until the high
watermark covers what was written. Validation of the bytes is the log's (header and CRC of
every batch, sizes): records are never decoded here. One bad partition gets its own error code
and changes nothing; the others are appended.

acks=0 appends like acks=1 but the caller does not wait for an answer (a stream sends none).
acks=all first needs `min.insync.replicas` members in the ISR (else NOT_ENOUGH_REPLICAS, nothing
written), then waits in the purgatory until the high watermark passes the batch, i.e. every
member of the ISR has it; if the ISR shrank below the minimum meanwhile the answer is
NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are in the log, as in Kafka).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import Acks, TopicPartition

from .partition import Partition
from .purgatory import DelayedProduce, Purgatory
from .replica_manager import ReplicaManager
from .requests import ProduceParams, ProducePartitionResult

log = logging.getLogger(__name__)

DEFAULT_ACKS_TIMEOUT_MS = 30_000


@dataclass(slots=True)
class PendingProduce:
    """Appended partitions waiting for their acknowledgement (acks=all), with the results."""

    acks: Acks | None
    timeout_ms: int
    results: list[ProducePartitionResult]
    waiting: list[tuple[Partition, ProducePartitionResult]]


class ProduceHandler:
    """Appends produce requests to the leader replicas. Event-loop thread only."""

    def __init__(self, replicas: ReplicaManager, purgatory: Purgatory[TopicPartition]) -> None:
        self._replicas = replicas
        self._purgatory = purgatory

    async def produce(self, params: ProduceParams) -> list[ProducePartitionResult]:
        return await self.complete(self.append(params))

    def append(self, params: ProduceParams) -> PendingProduce:
        results: list[ProducePartitionResult] = []
        waiting: list[tuple[Partition, ProducePartitionResult]] = []
        seen: set[TopicPartition] = set()
        for data in params.partitions:
            result = ProducePartitionResult(data.tp)
            results.append(result)
            try:
                if params.acks is None:
                    raise RiverlogError("acks must be 0, 1 or all", ErrorCode.INVALID_REQUIRED_ACKS)
                if data.tp in seen:
                    raise RiverlogError(
                        f"{data.tp} appears twice in the request", ErrorCode.INVALID_REQUEST
                    )
                seen.add(data.tp)
                partition = self._replicas.get_partition(data.tp, data.current_leader_epoch)
                partition.check_may_take_writes()
                if not data.records:
                    raise RiverlogError(
                        f"{data.tp}: the records are empty (at least one record batch needed)",
                        ErrorCode.INVALID_REQUEST,
                    )
                if params.acks is Acks.ALL:
                    partition.replication.check_min_isr()
                info = partition.append_as_leader(data.records, params.origin)
            except RiverlogError as exc:
                result.fail(exc)
                self._replicas.storage_error(data.tp, exc)  # a failed disk: dir offline
                continue
            except OSError as exc:
                log.error("%s: append failed: %s", data.tp, exc)
                result.fail(RiverlogError(f"{data.tp}: {exc}", ErrorCode.KAFKA_STORAGE_ERROR))
                self._replicas.storage_error(data.tp, exc)
                continue
            result.base_offset = info.first_offset
            result.last_offset = info.last_offset
            result.log_append_time_ms = info.log_append_time_ms
            result.log_start_offset = partition.log_start_offset
            if params.acks is Acks.ALL:
                waiting.append((partition, result))
        timeout = params.timeout_ms if params.timeout_ms > 0 else DEFAULT_ACKS_TIMEOUT_MS
        return PendingProduce(params.acks, timeout, results, waiting)

    async def complete(self, pending: PendingProduce) -> list[ProducePartitionResult]:
        """The results, once every acks=all partition is replicated to the ISR (or timed out:
        REQUEST_TIMED_OUT for the ones that were not; the records may still commit later)."""
        if not pending.waiting:
            return pending.results

        def acknowledged() -> bool:
            return all(_replicated(p, r) for p, r in pending.waiting)

        delayed = DelayedProduce(
            self._purgatory, [p.tp for p, _ in pending.waiting], pending.timeout_ms, acknowledged
        )
        await delayed.wait()
        for partition, result in pending.waiting:
            if partition.high_watermark > result.last_offset:
                replication = partition.replication
                if not replication.enough_replicas_after_append():
                    result.fail(
                        RiverlogError(
                            f"{partition.tp}: written, but the ISR {list(replication.isr)} is "
                            f"below min.insync.replicas ({partition.config.min_insync_replicas})",
                            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        )
                    )
                continue
            if not partition.is_leader:
                result.fail(
                    RiverlogError(
                        f"{partition.tp}: leadership moved before the records were replicated",
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    )
                )
            else:
                result.fail(
                    RiverlogError(
                        f"{partition.tp}: not replicated to the in-sync replicas in "
                        f"{pending.timeout_ms} ms",
                        ErrorCode.REQUEST_TIMED_OUT,
                    )
                )
        return pending.results


def _replicated(partition: Partition, result: ProducePartitionResult) -> bool:
    if not partition.is_leader:
        return True  # answer now: the caller must hear that leadership moved
    return partition.high_watermark > result.last_offset
