"""The Python SDK: Producer, Consumer and AdminClient over the gateway API, configured with
Kafka's key names.

    from riverlog.client import Producer, Consumer, AdminClient, NewTopic, TopicPartition

Everything the cluster reports is a `RiverlogError` (with `code`, `retriable`); the client's own
conditions are the subclasses in `riverlog.client.errors`. `riverlog.client.tracing` has
`process_span(record)` for a consumer's processing span linked to the producer's.
"""

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ._offsets import OffsetAndTimestamp
from .admin import AdminClient, ClusterDescription, ConfigEntry, NewTopic, TopicDescription
from .balance_admin import BalancePlan
from .config import AdminConfig, ConfigError, ConsumerConfig, ProducerConfig
from .consumer import Consumer, ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata
from .consumer.group import ConsumerGroupMetadata
from .errors import (
    ClientClosedError,
    ClientTimeoutError,
    CommitFailedError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    RecordTooLargeError,
)
from .log_dirs_admin import LogDirDescription, LogDirs, ReplicaInfo
from .producer import (
    AbortableTransactionError,
    FatalTransactionError,
    Producer,
    RecordFuture,
    RecordMetadata,
    TransactionStateError,
)
from .reassignment_admin import PartitionReassignment

__all__ = [
    "AbortableTransactionError",
    "AdminClient",
    "AdminConfig",
    "BalancePlan",
    "ClientClosedError",
    "ClientTimeoutError",
    "ClusterDescription",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ErrorCode",
    "FatalTransactionError",
    "LogDirDescription",
    "LogDirs",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionReassignment",
    "Producer",
    "ProducerConfig",
    "RebalanceInProgressError",
    "RecordFuture",
    "RecordMetadata",
    "RecordTooLargeError",
    "ReplicaInfo",
    "RiverlogError",
    "TopicDescription",
    "TopicPartition",
    "TransactionStateError",
]
