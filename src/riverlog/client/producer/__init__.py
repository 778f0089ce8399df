"""The producer: `Producer.send` → RecordAccumulator (per-partition batches) → Sender thread →
the gateway's Produce. See `producer.py` for the API and `sender.py` for delivery semantics."""

from .future import RecordFuture, RecordMetadata
from .producer import Producer
from .transaction_state import (
    AbortableTransactionError,
    FatalTransactionError,
    TransactionStateError,
)

__all__ = [
    "AbortableTransactionError",
    "FatalTransactionError",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "TransactionStateError",
]
