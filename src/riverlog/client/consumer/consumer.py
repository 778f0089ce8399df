"""`Consumer`: Kafka's consumer API over the gateway, for assigned partitions (`assign`) or as a
member of a consumer group (`subscribe`, with group.id; see `group/`).

`poll()` returns `{TopicPartition: [ConsumerRecord, ...]}` (kafka-python's shape: records of
one partition stay together and in offset order; iterate `.values()` or use `itertools.chain`
for a flat stream). Positions that are unknown or fall out of the log are reset by
auto.offset.reset through ListOffsets, each partition on its own: one whose topic does not
exist yet backs off and is retried while the others are read. Fetches stay in flight while
the application handles the last records, several per partition when reading behind the end of
the log (see `fetcher.py`), so throughput is not bound by round trips.

Threads: the consumer is used from one thread at a time. With a group, a heartbeat thread keeps
the membership alive and an async-commit worker sends commit_async's requests; the rebalance
listener and commit callbacks always run on the thread calling poll()/commit_*/close().
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .._closing import Closing
from .._connection import GatewayConnection
from .._metadata import MetadataCache
from .._offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    list_offsets,
    lookup_offsets,
)
from ..config import ConsumerConfig
from ..errors import ClientClosedError, ClientTimeoutError, NoOffsetForPartitionError
from .fetcher import ConsumerRecord, Fetcher
from .group import (
    ConsumerCoordinator,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    GatewayGroupApi,
    GroupApi,
    OffsetAndMetadata,
)
from .group.api import as_offsets
from .group.grpc_api import MetadataTopicSource
from .group.offsets import CommitCallback
from .subscription import EARLIEST, LATEST, NONE, SubscriptionState

_ids = itertools.count(1)
log = logging.getLogger(__name__)


class Consumer(Closing):
    """Reads assigned partitions. Not thread-safe: use it from one thread at a time (as
    Kafka's), except `close()`, which may not overlap another call either.

        with Consumer({"bootstrap.servers": "127.0.0.1:9092",
                       "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition("events", 0)])
            for tp, records in consumer.poll(timeout_ms=1000).items():
                ...

    Configuration: a dict of Kafka keys and/or keyword arguments with `_` for `.`; see
    `ConsumerConfig`. Lifecycle: created → assign → poll... → close().
    """

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self.config = config = ConsumerConfig.from_kafka(conf, **kwargs)
        client_id = config.client_id or f"riverlog-consumer-{next(_ids)}"
        self._conn = GatewayConnection(config.bootstrap_servers, client_id, config.credentials)
        self._subs = SubscriptionState(config.auto_offset_reset)
        self._metadata = MetadataCache(
            self._conn,
            max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
        )
        self._fetcher = Fetcher(config, self._conn, self._subs, self._metadata)
        self._closed = False
        self._coordinator: ConsumerCoordinator | None = None
        if config.group_id:
            self._coordinator = self._make_coordinator(GatewayGroupApi(self._conn))

    def _make_coordinator(self, api: GroupApi) -> ConsumerCoordinator:
        return ConsumerCoordinator(
            self.config, api, self._subs, MetadataTopicSource(self._metadata)
        )

    @property
    def client_id(self) -> str:
        return self._conn.client_id

    # ---- assignment and positions -------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any earlier assignment; partitions kept
        keep their position). New partitions start at the group's committed offset when
        group.id is set (as Kafka's consumer), else, or without one, per auto.offset.reset,
        unless `seek` sets them."""
        self._check_open()
        if self._subs.subscribed:
            raise RiverlogError("assign() after subscribe(): unsubscribe() first")
        self._subs.assign(partitions, from_committed=self._coordinator is not None)
        self._fetcher.clear()

    # ---- groups -------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group (group.id) and read the partitions it assigns from `topics`, or from
        every topic whose whole name matches `pattern` (re-matched every metadata.max.age.ms;
        a new match rebalances). The join happens in poll(); `listener` hears of the
        partitions revoked, assigned and lost, on the thread calling poll()."""
        self._check_open()
        coordinator = self._group("subscribe()")
        if isinstance(topics, str):
            topics = [topics]
        if (pattern is None) == (not topics):
            raise ValueError("subscribe() takes topics or a pattern (one of them)")
        if self._subs.partitions and not self._subs.subscribed:
            raise RiverlogError("subscribe() after assign(): unsubscribe() first")
        self._subs.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        coordinator.subscribe(list(topics), pattern is not None, listener)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id this consumer last joined with (Kafka's
        groupMetadata(); generation -1 and member id "" outside a generation)."""
        coordinator = self._group("group_metadata()")
        generation = coordinator.generation
        return ConsumerGroupMetadata(
            coordinator.group_id,
            generation.generation_id,
            generation.member_id,
            coordinator.instance_id,
        )

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched at the last refresh)."""
        return set(self._subs.subscription)

    def unsubscribe(self) -> None:
        """Stop reading: revoke the assignment (listener called), leave the group, and forget
        a manual assignment too."""
        self._check_open()
        if self._coordinator is not None and self._subs.subscribed:
            self._coordinator.unsubscribe()
        self._subs.unsubscribe()
        self._fetcher.clear()

    def _group(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise RiverlogError(f"{what} needs group.id", ErrorCode.INVALID_GROUP_ID)
        return self._coordinator

    def commit_sync(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit `offsets` (each the NEXT offset to read), or every position when None.
        Raises CommitFailedError when the group moved on without this member,
        RebalanceInProgressError during a rebalance (commit again after the next poll())."""
        self._check_open()
        coordinator = self._group("commit_sync()")
        coordinator.commit_sync(as_offsets(offsets), self._timeout_s(timeout_ms))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting; `callback(offsets, error_or_None)` runs on this thread at a
        later poll(), commit or close()."""
        self._check_open()
        coordinator = self._group("commit_async()")
        wanted = as_offsets(offsets)
        if wanted is None:
            wanted = {tp: OffsetAndMetadata(p) for tp, p in self._subs.consumed().items()}
        coordinator.offsets.commit_async(wanted, callback)

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of `partitions` (None where there is none)."""
        self._check_open()
        coordinator = self._group("committed()")
        found = coordinator.offsets.fetch_committed(list(partitions), self._timeout_s(timeout_ms))
        return {
            tp: None if c.offset < 0 else OffsetAndMetadata(c.offset, c.metadata, c.leader_epoch)
            for tp, c in found.items()
        }

    def _refresh_committed(self, timeout_s: float) -> None:
        if self._coordinator is not None:
            self._coordinator.refresh_committed_offsets(timeout_s)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.partitions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make `offset` the next one poll() returns for `tp`."""
        self._subs.seek(tp, offset)
        self._fetcher.clear(tp)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start of these partitions (all assigned ones if none given); looked
        up lazily, at the next poll() or position()."""
        self._reset(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the end of these partitions (all assigned ones if none given), lazily."""
        self._reset(partitions, LATEST)

    def _reset(self, partitions: tuple[TopicPartition, ...], policy: str) -> None:
        tps = list(partitions) or list(self._subs.partitions)
        self._subs.request_reset(tps, policy)
        for tp in tps:
            self._fetcher.clear(tp)

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record poll() returns for `tp`, looking it up first when it
        is unknown (the group's committed offset, auto.offset.reset or a pending seek_to_*)."""
        state = self._subs.state(tp)
        if state.position is None:
            timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
            self._refresh_committed(timeout / 1000)
            self._update_positions(timeout / 1000, only=tp)
        if state.position is None:
            raise ClientTimeoutError(f"the position of {tp} is not known yet")
        return state.position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of `tp` as of the last fetch answer, None before one."""
        hw = self._subs.state(tp).high_watermark
        return hw if hw >= 0 else None

    def _update_positions(self, timeout_s: float, only: TopicPartition | None = None) -> None:
        """Look up the positions to reset, each on its own (Kafka's resetPositionsIfNeeded):
        a partition that cannot be looked up yet (UNKNOWN_TOPIC_OR_PARTITION: its topic is
        not created yet, or has fewer partitions) backs off, retry.backoff.ms doubling up to
        retry.backoff.max.ms, and the others are reset and fetched meanwhile. poll() makes one
        attempt (timeout 0); position() retries its partition until its timeout."""
        if only is None:
            needing = self._subs.needing_reset(time.monotonic())
        else:
            needing = {tp: p for tp, p in self._subs.needing_reset().items() if tp == only}
        if not needing:
            return
        undefined = {tp: -1 for tp, policy in needing.items() if policy == NONE}
        if undefined:
            raise NoOffsetForPartitionError(undefined)
        queries = {
            tp: EARLIEST_TIMESTAMP if policy == EARLIEST else LATEST_TIMESTAMP
            for tp, policy in needing.items()
        }
        self._check_open()
        config = self.config
        found, failed = lookup_offsets(
            self._conn,
            queries,
            timeout_s=timeout_s,
            request_timeout_s=config.request_timeout_ms / 1000,
            backoff_s=config.retry_backoff_ms / 1000,
            read_committed=config.isolation_level == "read_committed",
        )
        for tp, result in found.items():
            state = self._subs.partitions.get(tp)
            if state is not None and state.position is None and result is not None:
                if state.reset_failures:
                    log.info("offset reset of %s done (%d) after failing", tp, result.offset)
                state.seek(result.offset)
        now = time.monotonic()
        for tp, error in failed.items():
            state = self._subs.partitions.get(tp)
            if state is None or state.position is not None:
                continue
            backoff_ms = min(
                config.retry_backoff_ms * 2 ** min(state.reset_failures, 30),
                config.retry_backoff_max_ms,
            )
            state.reset_failures += 1
            state.backoff_until = now + backoff_ms / 1000
            if error is not None and error.refresh_metadata:
                self._metadata.invalidate(tp.topic)
            log.log(
                logging.WARNING if state.reset_failures == 1 else logging.DEBUG,
                "offset reset of %s failed, retried in %d ms while the others are read (%s)",
                tp,
                backoff_ms,
                error if error is not None else "no answer",
            )

    def metrics(self) -> dict[str, float]:
        """Kafka's fetch-throttle-time-avg / -max (ms, over the last minute of responses), and
        direct-fetch-total / direct-grant-total: fetches sent straight to partition leaders
        and the grants they went under (direct.access, decision 0047)."""
        return {**self._conn.throttle.metrics("fetch"), **self._fetcher.metrics()}

    # ---- polling ------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, waiting up to `timeout_ms` for some.

        At most `max_records` (default max.poll.records) in all. Before returning it sends the
        next fetch, so records arrive while the application processes these. Raises
        OffsetOutOfRangeError when a partition needs a reset and auto.offset.reset is none,
        and RiverlogError for a partition error that retrying cannot fix.
        """
        self._check_open()
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit <= 0:
            raise ValueError(f"max_records must be positive, not {max_records}")
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        fetcher = self._fetcher
        coordinator = self._coordinator
        while True:
            if coordinator is not None:
                if not coordinator.poll(max(deadline - time.monotonic(), 0.0)):
                    return {}  # still joining: the join continues at the next poll
                self._refresh_committed(max(deadline - time.monotonic(), 0.0))
            self._update_positions(0.0)  # one attempt: failed partitions back off alone
            records = fetcher.collect(limit)
            fetcher.send_fetch()
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            if not fetcher.in_flight:
                # Nothing to fetch (no assignment, every partition backing off, or waiting
                # for a reset that failed).
                time.sleep(min(remaining, self.config.retry_backoff_ms / 1000))
                continue
            fetcher.wait(remaining)

    # ---- offsets look-ups ---------------------------------------------------------------

    def _list_offsets(
        self, queries: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self._check_open()
        config = self.config
        return list_offsets(
            self._conn,
            queries,
            timeout_s=timeout_s,
            request_timeout_s=config.request_timeout_ms / 1000,
            backoff_s=config.retry_backoff_ms / 1000,
            read_committed=config.isolation_level == "read_committed",
        )

    def _timeout_s(self, timeout_ms: int | None) -> float:
        return (self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms) / 1000

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is at or after the one given
        (ms since the epoch) with that record's timestamp; None if there is none."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"{tp}: the timestamp must not be negative, not {ts}")
        return self._list_offsets(timestamps, self._timeout_s(timeout_ms))

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return self._offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The end offset (high watermark: the offset the next record will get)."""
        return self._offsets(partitions, LATEST_TIMESTAMP, timeout_ms)

    def _offsets(
        self, partitions: Iterable[TopicPartition], spec: int, timeout_ms: int | None
    ) -> dict[TopicPartition, int]:
        found = self._list_offsets(dict.fromkeys(partitions, spec), self._timeout_s(timeout_ms))
        out: dict[TopicPartition, int] = {}
        for tp, result in found.items():
            if result is None:
                raise RiverlogError(f"{tp}: no offset returned")
            out[tp] = result.offset
        return out

    # ---- lifecycle ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer")

    def close(self) -> None:
        """With a group: commit positions (enable.auto.commit), revoke the assignment, leave
        the group (dynamic members; static ones keep their assignment for session.timeout.ms).
        Then drop buffered records, cancel the fetch in flight, close the channels. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._coordinator is not None:
                self._coordinator.close(self.config.default_api_timeout_ms / 1000)
        finally:
            self._fetcher.close()
            self._conn.close()

    def __repr__(self) -> str:
        return f"<Consumer {self.client_id} → {','.join(self._conn.servers)}>"
