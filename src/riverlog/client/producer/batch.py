"""One partition's batch in the producer: the open BatchBuilder, then the built bytes, the
shared result its records' futures point at, and the bookkeeping of its attempts.

Moved between threads under the accumulator's lock: appended to by application threads while
open, then owned by the sender thread from drain to outcome.
"""

from __future__ import annotations

from typing import Any

from riverlog.common.records.builder import BatchBuilder

from .future import BatchResult


class ProducerBatch:
    """One partition's batch, from the first append to its outcome.

    Lifecycle: open (appended to under the accumulator lock) → closed (full, or drained) →
    `data` built by the sender → in flight → completed, or re-enqueued for a retry with the same
    bytes. `created` and `retry_at` are in the accumulator clock's seconds.
    """

    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "closed",
        "count",
        "created",
        "data",
        "last_error",
        "maybe_written",
        "owner",
        "partition",
        "reserved",
        "result",
        "retry_at",
        "topic",
        "trace_context",
    )

    def __init__(self, topic: str, partition: int, builder: BatchBuilder, created: float) -> None:
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.result = BatchResult(topic, partition)
        self.created = created
        self.count = 0
        self.closed = False
        self.data: bytes | None = None
        self.attempts = 0
        self.last_error: BaseException | None = None
        self.retry_at = 0.0
        self.reserved = 0
        self.trace_context: Any = None
        # Idempotence: the (producer id, epoch) and first sequence the bytes were built with.
        self.owner: Any = None
        self.base_sequence = -1
        # An attempt ended with no leader answer saying it was refused: it may be in the log.
        self.maybe_written = False

    def build(self) -> bytes:
        """The batch bytes, built once (retries resend the same bytes)."""
        if self.data is None:
            self.data = self.builder.build()
        return self.data

    @property
    def size(self) -> int:
        """Bytes on the wire if built, else the uncompressed estimate."""
        return len(self.data) if self.data is not None else self.builder.size_in_bytes

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}-{self.partition} records={self.count}>"
