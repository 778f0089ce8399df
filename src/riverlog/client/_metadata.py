"""What a client knows of the cluster's topics: partition counts and which partitions have a
leader, from the gateway's GetMetadata, cached for metadata.max.age.ms.

The gateway routes every request to partition leaders itself, so a client needs metadata only to
choose partitions (how many there are, and which are available for sticky partitioning), to
wait for a new topic to appear, and to send the consumer's fetches one per leader (a hint: a
stale leader only costs the gateway a fan-out). Reads of the cache are lock-free dict look-ups,
cheap enough for the producer's per-record path; refreshes take a lock so concurrent callers
share one RPC.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import gateway_pb2

from ._connection import GatewayConnection
from .errors import ClientTimeoutError

INVALIDATED = 0.0
"""`TopicInfo.expires_at` of an entry `invalidate` marked (an error said the metadata changed),
told apart from one merely older than metadata.max.age.ms."""


class TopicInfo(NamedTuple):
    """One topic as last seen: partition count, partitions with a leader, when to refresh."""

    num_partitions: int
    available: tuple[int, ...]
    expires_at: float  # time.monotonic() after which the entry is stale
    leaders: tuple[int, ...] = ()  # node id of each partition's leader, -1 none


class MetadataCache:
    """Topic metadata of one client.

    Thread-safe: any thread may call `get`, `partitions`, `invalidate` and `refresh`.
    `topics` may be read directly (a dict replaced entry by entry, never mutated in place).
    """

    def __init__(
        self,
        conn: GatewayConnection,
        *,
        max_age_ms: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
    ) -> None:
        self._conn = conn
        self._max_age_s = max_age_ms / 1000
        self._backoff_s = max(retry_backoff_ms, 1) / 1000
        self._timeout_s = request_timeout_ms / 1000
        self._lock = threading.Lock()
        self.topics: dict[str, TopicInfo] = {}

    def get(self, topic: str) -> TopicInfo | None:
        """The cached entry if fresh, else None (no RPC)."""
        info = self.topics.get(topic)
        if info is None or info.expires_at < time.monotonic():
            return None
        return info

    def leader(self, topic: str, partition: int) -> int:
        """The node id of the partition's leader as last seen (stale or not), -1 unknown."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.leaders):
            return -1
        return info.leaders[partition]

    def invalidate(self, topic: str) -> None:
        """Make the next look-up of `topic` ask the gateway (after an error that says the
        metadata changed: unknown partition, no leader)."""
        info = self.topics.get(topic)
        if info is not None:
            self.topics[topic] = info._replace(expires_at=INVALIDATED)

    def refresh(self, topics: list[str]) -> dict[str, TopicInfo]:
        """Ask the gateway for `topics` now; returns (and caches) those that exist.

        Raises RiverlogError for a failed call; a topic that does not exist is simply absent.
        """
        request = gateway_pb2.GetMetadataRequest(topics=topics, include_internal=True)
        response = self._conn.call(lambda s: s.GetMetadata, request, self._timeout_s)
        return self._apply(response)

    def refresh_async(self, topics: list[str], done: Callable[[], None]) -> None:
        """`refresh` without waiting for it: `done()` is called (on a gRPC thread) once the
        answer is cached, or the call failed (then nothing changes). For a thread that must
        not block on the gateway (the producer's sender, routing to leaders itself)."""
        request = gateway_pb2.GetMetadataRequest(topics=topics, include_internal=True)
        try:
            stub, _ = self._conn.stub()
            future = stub.GetMetadata.future(
                request, timeout=self._timeout_s, metadata=self._conn.metadata
            )
        except Exception:  # a closed client
            done()
            return

        def on_done(call: Any) -> None:
            try:
                self._apply(call.result())
            except Exception:  # a failed call, or an error for a topic: refreshed again later
                pass
            done()

        future.add_done_callback(on_done)

    def _apply(self, response: gateway_pb2.GetMetadataResponse) -> dict[str, TopicInfo]:
        expires = time.monotonic() + self._max_age_s
        found: dict[str, TopicInfo] = {}
        for topic in response.topics:
            parts = sorted(topic.partitions, key=lambda p: p.partition)
            if not parts:
                continue
            available = tuple(p.partition for p in parts if p.leader >= 0)
            leaders = tuple(p.leader for p in parts)
            info = TopicInfo(len(parts), available, expires, leaders)
            found[topic.name] = self.topics[topic.name] = info
        for result in response.errors:
            if int(result.error_code) not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                raise RiverlogError(
                    f"metadata of {result.name!r}: {result.error_message}",
                    ErrorCode(result.error_code),
                )
        return found

    def partitions(self, topic: str, max_block_ms: int) -> TopicInfo:
        """The topic's metadata, waiting up to `max_block_ms` for the topic to appear.

        Raises ClientTimeoutError when it does not appear in time; a non-retriable failure of
        the call (authorization, ...) is raised as it is.
        """
        info = self.get(topic)
        if info is not None:
            return info
        deadline = time.monotonic() + max_block_ms / 1000
        last_error: RiverlogError | None = None
        with self._lock:
            while True:
                info = self.get(topic)  # another thread may have refreshed it meanwhile
                if info is not None:
                    return info
                try:
                    found = self.refresh([topic]).get(topic)
                except RiverlogError as e:
                    stale = self.topics.get(topic)
                    if stale is not None:
                        return stale  # known before: better stale than blocked
                    if not e.retriable:
                        raise
                    found, last_error = None, e
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    cause = f" (last error: {last_error})" if last_error else ""
                    raise ClientTimeoutError(
                        f"topic {topic!r} not present in metadata after {max_block_ms} ms{cause}"
                    )
                time.sleep(min(self._backoff_s, remaining))
