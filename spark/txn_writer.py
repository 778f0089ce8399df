"""The exactly-once streaming sink (`option("riverlog.transactional", "true")`): each micro-batch's
writes become visible once the driver commits them, exactly once, even when tasks, executors or
the driver die.

Spark's Kafka sink is at least once: a retried task or a replayed micro-batch writes its rows
again. Here, for query q, micro-batch b and Spark partition p (q and b come from the task's
local properties, which Spark sets for every micro-batch):

1. The task opens a transactional producer with `transactional.id` = `<prefix>-<q>-<p>`.
   `init_transactions` fences any earlier attempt of the same task (a zombie, a retry, the run
   before a restart) and aborts what it left open.
2. It reads the sink's marker: the offset committed by group `<prefix>-<q>` for the pseudo
   partition (`riverlog-spark-sink`, p). At b + 1 or more, batch b of this partition already
   committed in an earlier run: the task writes nothing (the replay's duplicate is dropped).
3. Else it begins a transaction, sends its rows, commits the marker b + 1 with the
   transaction (`send_offsets_to_transaction`), flushes, and returns the transaction's id,
   producer id and epoch to the driver WITHOUT ending it.
4. The driver's `commit(messages, b)` ends every task's transaction with EndTxn(commit), one
   after the other: the batch becomes visible to read_committed readers once all are ended (a
   driver dying midway leaves part of it visible until the replay below). Spark records the
   batch as done only after that returns. `abort` ends them with EndTxn(abort).

If the driver dies between ending some transactions and recording the batch, the restarted
query replays b: the tasks whose transactions committed find their marker and write nothing;
the others were left open, are aborted by step 1, and write again. If a transaction times out
before the driver commits it (`transaction.timeout.ms`, 60 s here by default), EndTxn fails,
the query fails, and the replay writes the batch again: nothing is lost or duplicated in any
order of failures, as long as a replayed micro-batch has the same partitions with the same
rows (Spark's contract for exactly-once sinks, as its ForeachWriter's (partitionId, epochId)).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from riverlog.client import AdminClient, Producer
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

from .options import RiverlogOptionError, WriteOptions
from .writer import produce_rows

log = logging.getLogger(__name__)

MARKER_TOPIC = "riverlog-spark-sink"
BATCH_ID_KEY = "streaming.sql.batchId"
QUERY_ID_KEY = "sql.streaming.queryId"
DEFAULT_TRANSACTION_TIMEOUT_MS = "60000"


@dataclass(frozen=True)
class TxnWriteResult(WriterCommitMessage):
    """One task's open transaction (producer_id -1: nothing to end, the batch was already
    committed by an earlier run of this partition)."""

    records: int
    bytes: int
    transactional_id: str
    producer_id: int
    producer_epoch: int


def sink_names(prefix: str, query_id: str, partition: int) -> tuple[str, str]:
    """The task's transactional id and the sink's marker group."""
    return f"{prefix}-{query_id}-{partition}", f"{prefix}-{query_id}"


def already_committed(options: WriteOptions, group: str, partition: int, batch_id: int) -> bool:
    """Whether batch `batch_id` of Spark partition `partition` committed in an earlier run."""
    marker = TopicPartition(MARKER_TOPIC, partition)
    with AdminClient(options.admin_config()) as admin:
        committed = admin.list_group_offsets(group, [marker]).get(marker)
    return committed is not None and committed.offset > batch_id


def write_in_transaction(
    options: WriteOptions, batches: Iterator[pa.RecordBatch]
) -> TxnWriteResult:
    """Steps 1-3 of the module doc, in a Spark worker."""
    context = TaskContext.get()
    if context is None:
        raise RiverlogError("the transactional riverlog sink runs only inside a Spark task")
    batch_text, query_id = (
        context.getLocalProperty(BATCH_ID_KEY),
        context.getLocalProperty(QUERY_ID_KEY),
    )
    if batch_text is None or query_id is None:
        raise RiverlogOptionError(
            "riverlog.transactional is for streaming writes (writeStream): this task has no "
            "micro-batch id"
        )
    batch_id, partition = int(batch_text), context.partitionId()
    txn_id, group = sink_names(options.transactional_id_prefix, query_id, partition)
    config = {
        "transaction.timeout.ms": DEFAULT_TRANSACTION_TIMEOUT_MS,
        **options.producer_config(),
        "transactional.id": txn_id,
    }
    producer = Producer(config)
    try:
        producer.init_transactions()
        if already_committed(options, group, partition, batch_id):
            log.info("riverlog: %s batch %d already committed: skipped", txn_id, batch_id)
            return TxnWriteResult(0, 0, txn_id, -1, -1)
        producer.begin_transaction()
        written = produce_rows(producer, options, batches)
        producer.send_offsets_to_transaction(
            {TopicPartition(MARKER_TOPIC, partition): batch_id + 1}, group
        )
        producer.flush()
        ids = producer.producer_id_and_epoch
        assert ids is not None  # set by init_transactions
        return TxnWriteResult(written.records, written.bytes, txn_id, ids.producer_id, ids.epoch)
    finally:
        producer.close()  # leaves the transaction open: the driver ends it


def end_transactions(
    options: WriteOptions, results: Sequence[TxnWriteResult], commit: bool
) -> list[RiverlogError]:
    """Step 4: EndTxn for every open transaction of `results` (the SDK retries what is
    retriable); the errors that remain (empty: all ended)."""
    errors: list[RiverlogError] = []
    with AdminClient(options.admin_config()) as admin:
        for r in results:
            if r.producer_id < 0:
                continue
            try:
                admin.complete_transaction(
                    r.transactional_id, r.producer_id, r.producer_epoch, commit
                )
            except RiverlogError as e:
                what = "commit" if commit else "abort"
                errors.append(
                    RiverlogError(f"{r.transactional_id}: cannot {what}: {e.message}", e.code)
                )
    return errors


class RiverlogTransactionalStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("riverlog").option("riverlog.transactional", "true")`."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxnWriteResult:
        return write_in_transaction(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = [m for m in messages if isinstance(m, TxnWriteResult)]
        errors = end_transactions(self.options, results, commit=True)
        if errors:
            raise RiverlogError(
                f"micro-batch {batchId}: {len(errors)} of {len(results)} transactions did not "
                f"commit (the replay writes them again): {errors[0].message}",
                errors[0].code,
            )
        log.info(
            "riverlog: micro-batch %d committed %d records in %d transactions",
            batchId,
            sum(r.records for r in results),
            sum(1 for r in results if r.producer_id >= 0),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = [m for m in messages if isinstance(m, TxnWriteResult)]
        errors = end_transactions(self.options, results, commit=False)
        log.warning(
            "riverlog: micro-batch %d aborted (%d transactions could not be ended: they time out)",
            batchId,
            len(errors),
        )
