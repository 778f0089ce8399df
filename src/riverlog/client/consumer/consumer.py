"""`Consumer`: Kafka's consumer API over the gateway, for assigned partitions (no groups yet).

`poll()` returns `{TopicPartition: [ConsumerRecord, ...]}` (kafka-python's shape: records of
one partition stay together and in offset order; iterate `.values()` or use `itertools.chain`
for a flat stream). Positions that are unknown or fall out of the log are reset by
auto.offset.reset through ListOffsets. A fetch is always in flight while the application
handles the last records (see `fetcher.py`), so throughput is not bound by round trips.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping
from types import TracebackType

from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

from .._connection import GatewayConnection
from .._offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    list_offsets,
)
from ..config import ConsumerConfig
from ..errors import ClientClosedError, ClientTimeoutError, OffsetOutOfRangeError
from .fetcher import ConsumerRecord, Fetcher
from .subscription import EARLIEST, LATEST, NONE, SubscriptionState

_ids = itertools.count(1)


class Consumer:
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
        self._conn = GatewayConnection(config.bootstrap_servers, client_id)
        self._subs = SubscriptionState(config.auto_offset_reset)
        self._fetcher = Fetcher(config, self._conn, self._subs)
        self._closed = False

    @property
    def client_id(self) -> str:
        return self._conn.client_id

    # ---- assignment and positions -------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any earlier assignment; partitions kept
        keep their position). Positions of new partitions start per auto.offset.reset unless
        `seek` sets them."""
        self._check_open()
        self._subs.assign(partitions)
        self._fetcher.clear()

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
        is unknown (auto.offset.reset or a pending seek_to_*)."""
        state = self._subs.state(tp)
        if state.position is None:
            timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
            self._update_positions(timeout / 1000, only=tp)
        assert state.position is not None
        return state.position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of `tp` as of the last fetch answer, None before one."""
        hw = self._subs.state(tp).high_watermark
        return hw if hw >= 0 else None

    def _update_positions(self, timeout_s: float, only: TopicPartition | None = None) -> None:
        needing = self._subs.needing_reset()
        if only is not None:
            needing = {tp: p for tp, p in needing.items() if tp == only}
        if not needing:
            return
        undefined = {tp: -1 for tp, policy in needing.items() if policy == NONE}
        if undefined:
            raise OffsetOutOfRangeError(undefined)
        queries = {
            tp: EARLIEST_TIMESTAMP if policy == EARLIEST else LATEST_TIMESTAMP
            for tp, policy in needing.items()
        }
        found = self._list_offsets(queries, timeout_s)
        for tp, result in found.items():
            state = self._subs.partitions.get(tp)
            if state is not None and state.position is None and result is not None:
                state.seek(result.offset)

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
        while True:
            if self._subs.needing_reset():
                try:
                    self._update_positions(max(deadline - time.monotonic(), 0.0))
                except ClientTimeoutError:
                    pass  # offsets not available yet: try again at the next round
            records = fetcher.collect(limit)
            fetcher.send_fetch()
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            if not fetcher.in_flight:
                # Nothing to fetch (no assignment, or every partition backing off).
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
        """Drop buffered records, cancel the fetch in flight, close the channels. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.close()
        self._conn.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Consumer {self.client_id} → {','.join(self._conn.servers)}>"
