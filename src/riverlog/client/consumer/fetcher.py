"""The consumer's fetch pipeline: one Fetch request in flight while the application works
through the records of the last one, and the decode from batch bytes to ConsumerRecords.

As soon as a response arrives, the batch headers of each partition's bytes say where the next
fetch starts (`next_fetch_offset`, headers only), so the next request goes out before a single
record is decoded; each partition holds at most one undrained chunk beside the one being
fetched, which bounds memory to two responses. Records are decoded a chunk at a time by the
codec's columnar reader and turned into ConsumerRecord tuples in C (`map(tuple.__new__, zip)`),
with no Python code per record unless deserializers are configured.
"""

from __future__ import annotations

import time
from collections import deque
from functools import partial
from itertools import repeat
from typing import Any, NamedTuple, cast

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.records.reader import decode_columns, next_fetch_offset
from riverlog.common.records.record import Header
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2

from .._connection import GatewayConnection, rpc_error
from ..config import ConsumerConfig
from ..errors import OffsetOutOfRangeError
from .subscription import NONE, SubscriptionState


class ConsumerRecord(NamedTuple):
    """A record as poll() returns it. `timestamp_type`: 0 create time, 1 log append time.
    `headers`: (key, value) pairs in wire order; `key`/`value` None when null."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[Header]


_make_record = cast(Any, partial(tuple.__new__, ConsumerRecord))


class CompletedFetch:
    """One partition's bytes from one response, drained record by record by poll()."""

    __slots__ = ("data", "epoch", "fetch_offset", "index", "next_offset", "records", "tp")

    def __init__(
        self, tp: TopicPartition, epoch: int, fetch_offset: int, data: bytes, next_offset: int
    ) -> None:
        self.tp = tp
        self.epoch = epoch
        self.fetch_offset = fetch_offset
        self.data = data
        self.next_offset = next_offset
        self.records: list[ConsumerRecord] | None = None
        self.index = 0


class Fetcher:
    """Issues fetches and buffers their answers. Used by the consumer's thread only; the gRPC
    future completes on a gRPC thread but is read here (`future.result`)."""

    def __init__(
        self, config: ConsumerConfig, conn: GatewayConnection, subscriptions: SubscriptionState
    ) -> None:
        self._config = config
        self._conn = conn
        self._subs = subscriptions
        self._isolation = (
            common_pb2.READ_COMMITTED
            if config.isolation_level == "read_committed"
            else common_pb2.READ_UNCOMMITTED
        )
        self._timeout_s = (config.request_timeout_ms + config.fetch_max_wait_ms) / 1000
        self._backoff_s = config.retry_backoff_ms / 1000
        self._buffer: deque[CompletedFetch] = deque()
        self._in_flight: grpc.Future | None = None
        self._in_flight_epochs: dict[TopicPartition, tuple[int, int]] = {}
        self._in_flight_server = 0
        self._key_deserializer = config.key_deserializer
        self._value_deserializer = config.value_deserializer

    # ---- sending ------------------------------------------------------------------------

    def _fetch_position(self, tp: TopicPartition, position: int) -> tuple[int, int]:
        """Where to fetch `tp` next (past its buffered chunks) and how many chunks it has."""
        chunks = 0
        for chunk in self._buffer:
            if chunk.tp == tp:
                chunks += 1
                position = max(position, chunk.next_offset)
        return position, chunks

    def send_fetch(self) -> bool:
        """Send a fetch for every partition that can take one, unless one is in flight."""
        if self._in_flight is not None or self._conn.throttle_remaining_s() > 0:
            return False  # one at a time; none to a gateway that asked for a pause (quota)
        config = self._config
        partitions: list[data_pb2.FetchPartition] = []
        epochs: dict[TopicPartition, tuple[int, int]] = {}
        for tp in self._subs.fetchable():
            state = self._subs.partitions[tp]
            assert state.position is not None
            offset, chunks = self._fetch_position(tp, state.position)
            if chunks > 1:
                continue  # one chunk draining and one fetched ahead: enough
            partitions.append(
                data_pb2.FetchPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    fetch_offset=offset,
                    partition_max_bytes=config.max_partition_fetch_bytes,
                )
            )
            epochs[tp] = (state.epoch, offset)
        if not partitions:
            return False
        request = data_pb2.FetchRequest(
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            isolation_level=self._isolation,
            partitions=partitions,
        )
        stub, server = self._conn.stub()
        self._in_flight = stub.Fetch.future(
            request, timeout=self._timeout_s, metadata=self._conn.metadata
        )
        self._in_flight_epochs = epochs
        self._in_flight_server = server
        return True

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    # ---- receiving ----------------------------------------------------------------------

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the fetch in flight and buffer its answer. False if it is
        still pending (or none was in flight). Raises the errors poll() must report."""
        future = self._in_flight
        if future is None:
            return False
        try:
            response = future.result(timeout=max(timeout_s, 0.0))
        except grpc.FutureTimeoutError:
            return False
        except Exception as e:
            self._in_flight = None
            error = rpc_error(e)
            if isinstance(e, grpc.RpcError) and GatewayConnection.should_failover(e):
                self._conn.failover(self._in_flight_server)
            if not error.retriable:
                raise error from None
            backoff = time.monotonic() + self._backoff_s
            for tp in self._in_flight_epochs:
                state = self._subs.partitions.get(tp)
                if state is not None:
                    state.backoff_until = backoff
            return True
        self._in_flight = None
        self._conn.throttle.record(self._in_flight_server, response.throttle_time_ms)
        self._handle(response)
        return True

    def _handle(self, response: data_pb2.FetchResponse) -> None:
        out_of_range: dict[TopicPartition, int] = {}
        failure: RiverlogError | None = None
        for answer in response.partitions:
            tp = TopicPartition(answer.topic, answer.partition)
            state = self._subs.partitions.get(tp)
            sent = self._in_flight_epochs.get(tp)
            if state is None or sent is None or sent[0] != state.epoch:
                continue  # unassigned or seeked since: a stale answer
            fetch_offset = sent[1]
            code = answer.error_code
            if code == ErrorCode.NONE:
                state.high_watermark = answer.high_watermark
                state.log_start_offset = answer.log_start_offset
                data = answer.records
                if not data:
                    continue
                next_offset = next_fetch_offset(data, fetch_offset)
                if next_offset == fetch_offset:
                    failure = RiverlogError(
                        f"{tp}: the batch at offset {fetch_offset} is larger than "
                        f"max.partition.fetch.bytes ({self._config.max_partition_fetch_bytes})",
                        ErrorCode.MESSAGE_TOO_LARGE,
                    )
                    continue
                self._buffer.append(
                    CompletedFetch(tp, state.epoch, fetch_offset, data, next_offset)
                )
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._drop(tp)
                if self._subs.default_reset == NONE:
                    out_of_range[tp] = fetch_offset
                else:
                    state.request_reset(self._subs.default_reset)
            else:
                error = error_for(code, answer.error_message)
                if error.retriable:
                    state.backoff_until = time.monotonic() + self._backoff_s
                else:
                    failure = RiverlogError(f"{tp}: {error.message}", error.code)
        if out_of_range:
            raise OffsetOutOfRangeError(out_of_range)
        if failure is not None:
            raise failure

    def _drop(self, tp: TopicPartition) -> None:
        self._buffer = deque(chunk for chunk in self._buffer if chunk.tp != tp)

    def clear(self, tp: TopicPartition | None = None) -> None:
        """Forget buffered records (of `tp`, or all): after a seek or a new assignment."""
        if tp is None:
            self._buffer.clear()
        else:
            self._drop(tp)

    # ---- draining -----------------------------------------------------------------------

    def collect(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to `max_records` buffered records, in fetch order, advancing positions."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        wanted = max_records
        buffer = self._buffer
        partitions = self._subs.partitions
        while buffer and wanted > 0:
            chunk = buffer[0]
            state = partitions.get(chunk.tp)
            if state is None or state.epoch != chunk.epoch or state.position is None:
                buffer.popleft()  # unassigned or seeked since it was fetched
                continue
            records = chunk.records
            if records is None:
                records = chunk.records = self._decode(chunk, state.position)
                chunk.data = b""
            start = chunk.index
            taken = records[start : start + wanted]
            if taken:
                if self._key_deserializer is not None or self._value_deserializer is not None:
                    taken = self._deserialize(taken)
                out.setdefault(chunk.tp, []).extend(taken)
                chunk.index = start + len(taken)
                wanted -= len(taken)
                state.position = taken[-1].offset + 1
            if chunk.index >= len(records):
                buffer.popleft()
                if chunk.next_offset > state.position:
                    state.position = chunk.next_offset
        return out

    def _decode(self, chunk: CompletedFetch, position: int) -> list[ConsumerRecord]:
        cols = decode_columns(
            chunk.data, max(position, chunk.fetch_offset), validate_crc=self._config.check_crcs
        )
        tp = chunk.tp
        return list(
            map(
                _make_record,
                zip(
                    repeat(tp.topic),
                    repeat(tp.partition),
                    cols.offsets,
                    cols.timestamps,
                    cols.timestamp_types,
                    cols.keys,
                    cols.values,
                    cols.headers,
                ),
            )
        )

    def _deserialize(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        kd = self._key_deserializer
        vd = self._value_deserializer
        return [
            r._replace(
                key=kd(r.key) if kd is not None else r.key,
                value=vd(r.value) if vd is not None else r.value,
            )
            for r in records
        ]

    def close(self) -> None:
        if self._in_flight is not None:
            self._in_flight.cancel()
            self._in_flight = None
        self._buffer.clear()
