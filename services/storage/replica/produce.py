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

KIP-890 part 1 (`transaction.partition.verification.enable`): a client's transactional batch
whose producer has no transaction open at the partition is not appended at once. The
transactional id's coordinator is asked (one call shared by the batches that wait for the same
answer) and the append happens in `complete()`, after the answer, re-checking the producer
state against the verification's guard; other partitions and producers are not held up.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import Acks, TopicPartition

from ..log import AppendOrigin
from ..producer.verification import VerificationGuard, VerificationNeeded, produce_error
from .partition import Partition
from .purgatory import DelayedProduce, Purgatory
from .replica_manager import ReplicaManager
from .requests import ProduceParams, ProducePartitionData, ProducePartitionResult

log = logging.getLogger(__name__)

DEFAULT_ACKS_TIMEOUT_MS = 30_000


Verification = tuple[ErrorCode, str]


class TxnVerifier(Protocol):
    """Asks the transactional id's coordinator whether `tp` is in the producer's ongoing
    transaction at this epoch (AddPartitionsToTxn verify_only); failures come back as codes."""

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> Verification: ...


@dataclass(slots=True)
class Deferred:
    """A partition's append waiting for its KIP-890 verification."""

    data: ProducePartitionData
    result: ProducePartitionResult
    guard: VerificationGuard
    verification: asyncio.Future[Verification]


@dataclass(slots=True)
class PendingProduce:
    """Appended partitions waiting for their acknowledgement (acks=all), with the results;
    `deferred` ones are appended once verified."""

    acks: Acks | None
    timeout_ms: int
    results: list[ProducePartitionResult]
    waiting: list[tuple[Partition, ProducePartitionResult]]
    deferred: list[Deferred] = field(default_factory=list)
    origin: AppendOrigin = AppendOrigin.CLIENT


class ProduceHandler:
    """Appends produce requests to the leader replicas. Event-loop thread only. `verifier`
    None: no KIP-890 verification (`transaction.partition.verification.enable=false`)."""

    def __init__(
        self,
        replicas: ReplicaManager,
        purgatory: Purgatory[TopicPartition],
        verifier: TxnVerifier | None = None,
    ) -> None:
        self._replicas = replicas
        self._purgatory = purgatory
        self._verifier = verifier
        # Verifications in flight, shared by the batches that wait for the same answer.
        self._in_flight: dict[
            tuple[str, int, int, TopicPartition], asyncio.Future[Verification]
        ] = {}

    async def produce(self, params: ProduceParams) -> list[ProducePartitionResult]:
        return await self.complete(self.append(params))

    def append(self, params: ProduceParams) -> PendingProduce:
        timeout = params.timeout_ms if params.timeout_ms > 0 else DEFAULT_ACKS_TIMEOUT_MS
        pending = PendingProduce(params.acks, timeout, [], [], origin=params.origin)
        verify = self._verifier is not None and params.origin is AppendOrigin.CLIENT
        seen: set[TopicPartition] = set()
        for data in params.partitions:
            result = ProducePartitionResult(data.tp)
            pending.results.append(result)
            try:
                if params.acks is None:
                    raise RiverlogError("acks must be 0, 1 or all", ErrorCode.INVALID_REQUIRED_ACKS)
                if data.tp in seen:
                    raise RiverlogError(
                        f"{data.tp} appears twice in the request", ErrorCode.INVALID_REQUEST
                    )
                seen.add(data.tp)
                partition = self._writable(data, params.acks)
                needed = (
                    partition.producer_state.verification_needed(data.records) if verify else None
                )
            except RiverlogError as exc:
                result.fail(exc)
                self._replicas.storage_error(data.tp, exc)
                continue
            if needed is not None:
                guard = partition.producer_state.verification_guard(needed)
                future = self._verify(params.transactional_id, needed, data.tp)
                pending.deferred.append(Deferred(data, result, guard, future))
                continue
            self._append_one(pending, data, result, partition, verify=verify, guard=None)
        return pending

    def _writable(self, data: ProducePartitionData, acks: Acks | None) -> Partition:
        partition = self._replicas.get_partition(data.tp, data.current_leader_epoch)
        partition.check_may_take_writes()
        if not data.records:
            raise RiverlogError(
                f"{data.tp}: the records are empty (at least one record batch needed)",
                ErrorCode.INVALID_REQUEST,
            )
        if acks is Acks.ALL:
            partition.replication.check_min_isr()
        return partition

    def _append_one(
        self,
        pending: PendingProduce,
        data: ProducePartitionData,
        result: ProducePartitionResult,
        partition: Partition | None,
        *,
        verify: bool,
        guard: VerificationGuard | None,
    ) -> None:
        """Append one partition's records (`partition` None: look it up and check it again,
        after a verification)."""
        try:
            if partition is None:
                partition = self._writable(data, pending.acks)
            info = partition.append_as_leader(
                data.records, pending.origin, verify=verify, guard=guard
            )
        except RiverlogError as exc:
            result.fail(exc)
            self._replicas.storage_error(data.tp, exc)  # a failed disk: dir offline
            return
        except OSError as exc:
            log.error("%s: append failed: %s", data.tp, exc)
            result.fail(RiverlogError(f"{data.tp}: {exc}", ErrorCode.KAFKA_STORAGE_ERROR))
            self._replicas.storage_error(data.tp, exc)
            return
        result.base_offset = info.first_offset
        result.last_offset = info.last_offset
        result.log_append_time_ms = info.log_append_time_ms
        result.log_start_offset = partition.log_start_offset
        if pending.acks is Acks.ALL:
            pending.waiting.append((partition, result))

    def _verify(
        self, transactional_id: str, needed: VerificationNeeded, tp: TopicPartition
    ) -> asyncio.Future[Verification]:
        """The verification of `needed` at `tp`: the one in flight, or a new call."""
        key = (transactional_id, needed.producer_id, needed.producer_epoch, tp)
        future = self._in_flight.get(key)
        if future is not None:
            return future
        verifier = self._verifier
        assert verifier is not None

        async def call() -> Verification:
            if not transactional_id:
                return (
                    ErrorCode.INVALID_TXN_STATE,
                    f"{tp}: a transactional batch of producer {needed.producer_id} came "
                    "without its transactional id",
                )
            return await verifier.verify(
                transactional_id, needed.producer_id, needed.producer_epoch, tp
            )

        task = asyncio.ensure_future(call())
        self._in_flight[key] = task
        task.add_done_callback(lambda _t: self._in_flight.pop(key, None))
        return task

    async def finish_deferred(self, pending: PendingProduce) -> None:
        """Append the deferred partitions, in request order, as their verifications answer:
        NONE appends (if the guard still holds), anything else refuses with Kafka's code."""
        deferred, pending.deferred = pending.deferred, []
        for d in deferred:
            try:
                error, message = await asyncio.shield(d.verification)
            except Exception as exc:  # the verifier answers with codes; a bug must not hang
                log.error("%s: verification failed: %s", d.data.tp, exc)
                error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
            if error != ErrorCode.NONE:
                code = produce_error(error)
                d.result.fail(
                    RiverlogError(
                        f"{d.data.tp}: transaction verification failed ({error.name}): {message}",
                        code,
                    )
                )
                continue
            self._append_one(pending, d.data, d.result, None, verify=True, guard=d.guard)

    async def complete(self, pending: PendingProduce) -> list[ProducePartitionResult]:
        """The results, once every acks=all partition is replicated to the ISR (or timed out:
        REQUEST_TIMED_OUT for the ones that were not; the records may still commit later)."""
        if pending.deferred:
            await self.finish_deferred(pending)
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
