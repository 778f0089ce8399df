"""The consumer: `Consumer.poll` over a pipelined Fetcher (one fetch in flight while the last
answer is consumed) and a SubscriptionState of assigned or group-assigned partitions; the
group membership is in `group/`."""

from .._offsets import OffsetAndTimestamp
from .consumer import Consumer
from .fetcher import ConsumerRecord
from .group import ConsumerRebalanceListener, OffsetAndMetadata

__all__ = [
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
]
