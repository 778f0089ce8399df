"""The storage node's log layer: segmented partition logs on local disk, their indexes,
recovery, retention and checkpoints (Kafka's storage module). Pure domain code: no gRPC.

The storage service codes against `LogManager` (all partitions of the node) and
`PartitionLog` (one partition); the rest is their machinery.
"""

from .checkpoint import CheckpointFile, CorruptCheckpointError, OffsetCheckpointFile
from .config import LogConfig
from .file_records import FetchSlice, FileRange
from .leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from .log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from .log_validator import AppendInfo, AppendOrigin
from .partition_log import PartitionLog

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "AppendOrigin",
    "CheckpointFile",
    "CorruptCheckpointError",
    "EpochEntry",
    "FetchSlice",
    "FileRange",
    "LeaderEpochFileCache",
    "LogConfig",
    "LogManager",
    "OffsetCheckpointFile",
    "PartitionLog",
]
