"""Producer state for idempotence (Kafka's storage-side producer state): per partition, each
producer id's epoch and last batches (PRODUCER_BATCH_WINDOW), checked by the leader before an
append, snapshotted to `<offset>.snapshot` files and rebuilt from snapshot + log headers. Pure
domain code."""

from .append_check import Duplicate, LeaderCheck
from .entry import BATCH_RETAIN, BatchMetadata, ProducerStateEntry
from .manager import ProducerStateManager

__all__ = [
    "BATCH_RETAIN",
    "BatchMetadata",
    "Duplicate",
    "LeaderCheck",
    "ProducerStateEntry",
    "ProducerStateManager",
]
