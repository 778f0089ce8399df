"""The consumer: `Consumer.poll` over a pipelined Fetcher (several fetches in flight per
partition while the answers in hand are consumed) and a SubscriptionState of assigned or
group-assigned partitions; the group membership is in `group/`."""

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
