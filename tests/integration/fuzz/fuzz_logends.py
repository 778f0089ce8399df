"""The write oracle of produce-type calls: nothing is written for a refused request.

Log end offsets are read from every storage node (DescribeLogDirs) before and after the call,
and a partition's end is the largest over its replicas: that only grows when a leader appends
(a follower catching up never passes its leader, and a truncation only lowers it), so it is
immune to replication lag and leader changes. After the call, a partition that grew must have
been answered as written (error 0) or as maybe written (a timeout, not enough replicas after
the append); every other partition of the cluster must have kept its end. Calls whose outcome
is unknowable (deadline exceeded, acks=0, a stream that ended in an error, raw bytes the server
accepted) are skipped, and the next check waits for the log ends to settle first.

Internal topics (`__consumer_offsets`) are left out of the growth check, since the group
coordinators write them concurrently; a client write to them is caught by `internal_writes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from fuzz_gateway import INDETERMINATE_STATUSES, Example, Outcome, walk

from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import common_pb2, storage_pb2, storage_pb2_grpc

LogEnds = dict[tuple[str, int], int]

# Per-item codes that leave it open whether the records were appended.
MAYBE_WRITTEN = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    }
)


def internal(topic: str) -> bool:
    return topic.startswith("__")


class LogEndReader:
    """Max log end offset per partition over the storage nodes at `addresses`."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self._channels = [sync_channel(a) for a in addresses]
        self._stubs = [storage_pb2_grpc.StorageServiceStub(c) for c in self._channels]

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def read(self) -> LogEnds:
        ends: LogEnds = {}
        for stub in self._stubs:
            answer = stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=20)
            for log_dir in answer.log_dirs:
                for p in log_dir.partitions:
                    key = (p.topic, p.partition)
                    ends[key] = max(ends.get(key, 0), p.log_end_offset)
        return ends

    def settled(self, attempts: int = 20) -> LogEnds:
        """Log ends once two reads in a row agree (bounded): an append the previous call
        left in flight (acks=0) has landed."""
        last = self.read()
        for _ in range(attempts):
            current = self.read()
            if current == last:
                return current
            last = current
        return last


def _requests_acks_none(example: Example) -> bool:
    for request in example.requests:
        if isinstance(request, bytes):
            continue
        for m in walk(request):
            if "acks" in m.DESCRIPTOR.fields_by_name and m.acks == common_pb2.ACKS_NONE:
                return True
    return False


def indeterminate(example: Example, outcome: Outcome) -> bool:
    if outcome.code in INDETERMINATE_STATUSES:
        return True
    if example.method.client_streaming and outcome.code != grpc.StatusCode.OK:
        return True
    if any(isinstance(r, bytes) for r in example.requests) and outcome.code == grpc.StatusCode.OK:
        return True
    return _requests_acks_none(example)


def _request_topic(example: Example) -> str | None:
    """The request-wide topic of a request that names one (ProduceRecords)."""
    for request in example.requests:
        if not isinstance(request, bytes) and "topic" in request.DESCRIPTOR.fields_by_name:
            return str(request.topic)
    return None


def answered_items(example: Example, outcome: Outcome) -> list[tuple[str, int, int]]:
    """(topic, partition, error_code) of every per-item answer of the responses."""
    default_topic = _request_topic(example)
    items: list[tuple[str, int, int]] = []
    for response in outcome.responses:
        for m in walk(response):
            fields = m.DESCRIPTOR.fields_by_name
            if "error_code" not in fields or "partition" not in fields:
                continue
            topic = m.topic if "topic" in fields else default_topic
            if topic is not None:
                items.append((topic, m.partition, m.error_code))
    return items


def unexpected_growth(
    example: Example, outcome: Outcome, before: LogEnds, after: LogEnds
) -> list[str]:
    """Partitions that grew although no answer said they might have been written."""
    allowed = {(t, p) for t, p, code in answered_items(example, outcome) if code in MAYBE_WRITTEN}
    grown = growth_outside(allowed, before, after)
    if not grown:
        return []
    return [f"{example.name} ({outcome.code.name}) wrote to partitions it refused: {grown}"]


def growth_outside(allowed: set[tuple[str, int]], before: LogEnds, after: LogEnds) -> list[str]:
    """Partitions (internal ones aside) whose log end grew, other than `allowed`."""
    return [
        f"{t}-{p}: {before.get((t, p), 0)} -> {end}"
        for (t, p), end in sorted(after.items())
        if end > before.get((t, p), 0) and not internal(t) and (t, p) not in allowed
    ]


def internal_writes(example: Example, outcome: Outcome) -> list[str]:
    """A client may not append to (or delete records of) an internal topic, as in Kafka."""
    accepted = [
        f"{t}-{p}"
        for t, p, code in answered_items(example, outcome)
        if internal(t) and code == ErrorCode.NONE
    ]
    if not accepted:
        return []
    return [f"{example.name} was allowed to write to internal partitions {accepted}"]
