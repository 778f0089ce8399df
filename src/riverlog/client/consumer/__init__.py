"""The consumer: `Consumer.poll` over a pipelined Fetcher (one fetch in flight while the last
answer is consumed) and a SubscriptionState of assigned partitions; no groups yet."""

from .._offsets import OffsetAndTimestamp
from .consumer import Consumer
from .fetcher import ConsumerRecord

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndTimestamp"]
