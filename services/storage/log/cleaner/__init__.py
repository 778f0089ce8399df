"""Log compaction (Kafka's log cleaner): for `cleanup.policy=compact` topics, keep only the
latest record of each key below the first uncleanable offset, tombstones until
`delete.retention.ms` after they were first cleaned.

`LogCleaner` is the background service; `CleanerManager` chooses logs and keeps the
`cleaner-offset-checkpoint`; `Cleaner` runs one pass in a worker thread; `batch_filter` says
what stays of a batch; `OffsetMap` is the bounded key -> latest offset map.
"""

from .cleaner import Cleaner, CleanerStats, LogToClean
from .cleaner_manager import CleanerManager
from .log_cleaner import CleanerConfig, LogCleaner
from .offset_map import OffsetMap

__all__ = [
    "Cleaner",
    "CleanerConfig",
    "CleanerManager",
    "CleanerStats",
    "LogCleaner",
    "LogToClean",
    "OffsetMap",
]
