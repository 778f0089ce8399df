"""`Producer`: Kafka's producer API over the gateway, configured with Kafka's key names.

`send` does the per-record work on the caller's thread (choose the partition, append the
record to its partition's batch) and returns a light future; a background sender thread encodes
and ships whole batches. The send path is the SDK's hottest code: it reads cached metadata
without a lock, leaves headers, callbacks and tracing to a side path, takes the accumulator
lock once, appends the record to the batch's columns and returns a 2-tuple future (decision
0015). Where the C extension is built, a producer without serializers, transactions or tracing
has a C `send` (`_speedups.SendFast`) for the common call (topic, value, maybe a key with
partitioner.ignore.keys) that hands every other call to the Python `send`. `send_many` takes
many records at once and appends them by runs, with one result object for them all.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from riverlog.common.partitioner import murmur2
from riverlog.common.records.builder import encode_headers
from riverlog.common.records.compression import CompressionType
from riverlog.common.records.record import Header
from riverlog.common.types import TopicPartition

from .._closing import Closing
from .._connection import GatewayConnection
from .._metadata import MetadataCache, TopicInfo
from ..config import ProducerConfig
from ..consumer.group.api import ConsumerGroupMetadata, OffsetAndMetadata
from ..errors import ClientClosedError, ClientTimeoutError, RecordTooLargeError
from .accumulator import RECORD_MEMORY, RecordAccumulator, as_bytes
from .direct_io import Wakeup
from .future import Callback, RecordFuture, RecordFutures, delivery_callback
from .idempotence import ProducerIdAndEpoch
from .sender import Sender
from .transaction_manager import TransactionManager
from .transaction_state import TransactionStateError

try:
    from riverlog.common.records._speedups import SendFast
except ImportError:  # built without a C compiler: the Python send only
    SendFast = None  # type: ignore[assignment,misc]

_ids = itertools.count(1)
_INT64_MAX = (1 << 63) - 1
_monotonic = time.monotonic
_time_ns = time.time_ns


class Producer(Closing):
    """Sends records to topics; thread-safe (any thread may call any method).

        with Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}) as producer:
            future = producer.send("events", b"value", key=b"key")
            metadata = future.result(timeout=10)

    Configuration: a dict of Kafka keys and/or keyword arguments with `_` for `.`
    (`Producer(bootstrap_servers="...", acks="all")`); see `ProducerConfig`. Unknown keys raise
    ConfigError. Tracing is picked up if configured before the producer is created.

    Lifecycle: created → sending → `close()` (also on leaving a `with` block), which sends what
    is pending first. Callbacks run on the sender thread: they must not call `flush` or `close`.
    """

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self.config = config = ProducerConfig.from_kafka(conf, **kwargs)
        client_id = config.client_id or f"riverlog-producer-{next(_ids)}"
        self._conn = GatewayConnection(config.bootstrap_servers, client_id, config.credentials)
        self._metadata = MetadataCache(
            self._conn,
            max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
        )
        self._topics = self._metadata.topics  # the same dict, read lock-free by send()
        from .. import tracing

        # The direct path (decision 0047) serves its sockets where the sender waits: a Wakeup
        # instead of an Event. Not for transactions nor traced requests (the gateway's).
        event: threading.Event | Wakeup = (
            Wakeup()
            if config.direct_access and not config.transactional_id and not tracing.enabled()
            else threading.Event()
        )
        try:
            self._sender = Sender(config, self._conn, self._metadata, event)
            self._accumulator = RecordAccumulator(
                batch_size=config.batch_size,
                linger_ms=config.linger_ms,
                buffer_memory=config.buffer_memory,
                compression=CompressionType.from_name(config.compression_type),
                max_block_ms=config.max_block_ms,
                delivery_timeout_ms=config.delivery_timeout_ms,
                wakeup=event.set,
            )
            self._sender.accumulator = self._accumulator
            self._txn: TransactionManager | None = None
            if config.transactional_id:
                assert self._sender.idempotence is not None  # the config insists
                self._txn = TransactionManager(
                    config, self._conn, self._sender.idempotence, event.set
                )
                self._sender.transactions = self._txn
                # Only a transactional producer checks its state per record: its own send.
                self.send = self._send_in_transaction  # type: ignore[method-assign]
                self.send_many = self._send_many_in_transaction  # type: ignore[method-assign]
            self._append = self._accumulator.append
            self._append_sticky = self._accumulator.append_sticky
            self._max_block_ms = config.max_block_ms
            self._max_record = min(config.max_request_size, config.buffer_memory)
            self._roomy = RECORD_MEMORY + 64 + max(config.batch_size, 2 * self._max_record)
            self._ignore_keys = config.partitioner_ignore_keys
            self._key_serializer = config.key_serializer
            self._value_serializer = config.value_serializer
            self._traced = tracing.enabled()
            self._close_lock = threading.Lock()
            self._closed = False
            appender = self._accumulator.append_fast
            if (
                appender is not None
                and SendFast is not None
                and self._txn is None
                and not self._traced
                and self._key_serializer is None
                and self._value_serializer is None
            ):
                # send's common case in C; any other call goes on to the Python send
                self.send = SendFast(  # type: ignore[method-assign]
                    cast(Any, appender), self._topics, self._send_py, self._max_record,
                    self._ignore_keys,
                )  # fmt: skip
            self._sender.start()
        except BaseException:
            # Nothing else will close them: the Wakeup's socket pair and selector, the
            # gateway channels.
            if isinstance(event, Wakeup):
                event.close()
            self._conn.close()
            raise

    def _send_py(self, *args: Any, **kwargs: Any) -> RecordFuture:
        return Producer.send(self, *args, **kwargs)

    @property
    def client_id(self) -> str:
        return self._conn.client_id

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch | None:
        """The idempotent producer's id and epoch (InitProducerId at the first send: id -1
        until then); None with enable.idempotence=false. A transactional producer's: from
        init_transactions, then the one each commit or abort brings (KIP-890)."""
        if self._txn is not None:
            return self._txn.producer_id_and_epoch
        idem = self._sender.idempotence
        return None if idem is None else idem.producer_id_and_epoch

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its future (`.result(timeout)` → RecordMetadata).

        `value`/`key`: bytes or None (or anything the configured serializer takes). `headers`:
        (str, bytes | None) pairs. `partition`: explicit, else murmur2 of the key, else the
        sticky partition. `timestamp_ms`: default now. `callback(metadata, exception)` runs on
        the sender thread once the outcome is known. Blocks up to max.block.ms when the topic is
        not in the metadata yet or buffer.memory is used up, then raises ClientTimeoutError.
        The future is a light view on its batch's outcome (see `RecordFuture`); with many
        records at hand, `send_many` is cheaper still.
        """
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        info = self._topics.get(topic)
        if info is None or info.expires_at < _monotonic():
            info = self._topic_info(topic)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        elif not -1 <= timestamp_ms <= _INT64_MAX:
            raise ValueError(f"invalid timestamp {timestamp_ms}")
        if value is not None and len(value) > self._max_record:
            raise RecordTooLargeError(
                f"a record of {len(value)} bytes is larger than max.request.size or "
                f"buffer.memory ({self._max_record})"
            )
        if headers or callback is not None or self._traced:
            return self._send_extras(
                topic, info, value, key, headers, partition, timestamp_ms, callback
            )
        if partition is None:
            if key is None or self._ignore_keys:
                fast = self._accumulator.append_fast
                if fast is not None:
                    future = fast(topic, timestamp_ms, key, value)
                    if future is not None:
                        return future  # type: ignore[no-any-return]
                return self._append_sticky(
                    topic, info.available or range(info.num_partitions), timestamp_ms, key, value
                )
            partition = (murmur2(key) & 0x7FFFFFFF) % info.num_partitions
        elif not 0 <= partition < info.num_partitions:
            raise ValueError(
                f"partition {partition} of topic {topic!r} does not exist "
                f"({info.num_partitions} partitions)"
            )
        return self._append(topic, partition, timestamp_ms, key, value)

    def _can_send_at_once(
        self, topic: str, value: Any, key: Any, headers: Sequence[Header] | None
    ) -> bool:
        """Whether `send(topic, value, key, headers)` returns without waiting: the topic's
        metadata is cached and fresh and buffer.memory has room for a new batch holding the
        record. The asyncio producer (`riverlog.client.aio`) calls `send` on its event loop
        only then, else on its worker thread. Not used by `send` itself."""
        info = self._topics.get(topic)
        if info is None or info.expires_at < _monotonic() or self._closed:
            return False
        available = self._accumulator.available_memory
        if available >= self._roomy and not headers:
            return True  # room for any record (the common case: nothing to measure; a key
            # larger than max.request.size is an edge this ignores)
        if self._key_serializer is not None or self._value_serializer is not None:
            size = self._max_record  # the serialized size is not known yet
        else:
            try:
                size = 64 + (len(key) if key else 0) + (len(value) if value else 0)
                size += sum(len(k) + len(v or b"") + 16 for k, v in headers or ())
            except TypeError:
                return False  # send raises its own error: let it, off the loop
        return available >= RECORD_MEMORY + max(self.config.batch_size, size)

    def _send_in_transaction(self, topic: str, *args: Any, **kwargs: Any) -> RecordFuture:
        """`send` of a transactional producer: only between begin_transaction and the end."""
        assert self._txn is not None
        self._txn.check_can_send()
        return Producer.send(self, topic, *args, **kwargs)

    def _send_many_in_transaction(self, topic: str, *args: Any, **kwargs: Any) -> RecordFutures:
        assert self._txn is not None
        self._txn.check_can_send()
        return Producer.send_many(self, topic, *args, **kwargs)

    # ---- transactions (Kafka's KafkaProducer API, KIP-98) -----------------------------------

    def _transactions(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise TransactionStateError(f"{what} needs transactional.id")
        if self._closed:
            raise ClientClosedError("producer", f"cannot {what} after close()")
        return self._txn

    def _timeout_s(self, timeout: float | None) -> float:
        return self._max_block_ms / 1000 if timeout is None else timeout

    def init_transactions(self, timeout: float | None = None) -> None:
        """Once, before the first transaction: get the transactional id's producer id and
        epoch, fencing any older producer with the same transactional.id and aborting (or
        completing) what it left open. `timeout` seconds (default max.block.ms); on
        ClientTimeoutError call it again."""
        self._transactions("init_transactions").init_transactions(self._timeout_s(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction: `send` is allowed until commit or abort. No call is made: the
        coordinator hears of it with the first partition or offsets added."""
        self._transactions("begin_transaction").begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets (the position: the next record to read) with
        the transaction: visible to the group only if it commits. `group_metadata` is
        `consumer.group_metadata()` (the coordinator fences a consumer that fell out of its
        generation) or a group id."""
        self._transactions("send_offsets_to_transaction").send_offsets_to_transaction(
            offsets, group_metadata, self._timeout_s(timeout)
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it: read_committed consumers see
        all of them and the offsets sent with it take effect. Raises the abortable error if a
        record failed (abort, then go on) or FatalTransactionError when fenced (close)."""
        self._transactions("commit_transaction").commit_transaction(
            self.flush, self._timeout_s(timeout)
        )

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail (their futures say so), records
        written are never seen by read_committed consumers, the offsets are dropped."""
        self._transactions("abort_transaction").abort_transaction(
            self._accumulator.has_incomplete, self._timeout_s(timeout)
        )

    def _topic_info(self, topic: str) -> TopicInfo:
        if self._closed:
            raise ClientClosedError("producer", "cannot send after close()")
        return self._metadata.partitions(topic, self._max_block_ms)

    def _send_extras(
        self,
        topic: str,
        info: TopicInfo,
        value: Any,
        key: Any,
        headers: Sequence[Header] | None,
        partition: int | None,
        timestamp_ms: int,
        callback: Callback | None,
    ) -> RecordFuture:
        """`send` with headers, a callback or tracing."""
        on_done = None if callback is None else delivery_callback(callback)
        span = trace_context = None
        if self._traced:
            from ..tracing import start_send_span

            span, trace_context, headers = start_send_span(topic, headers)
        encoded = encode_headers(headers) if headers else None
        try:
            if partition is None:
                if key is None or self._ignore_keys:
                    return self._accumulator.append_sticky(
                        topic,
                        info.available or range(info.num_partitions),
                        timestamp_ms,
                        key,
                        value,
                        encoded,
                        on_done,
                        trace_context,
                    )
                partition = (murmur2(key) & 0x7FFFFFFF) % info.num_partitions
            elif not 0 <= partition < info.num_partitions:
                raise ValueError(
                    f"partition {partition} of topic {topic!r} does not exist "
                    f"({info.num_partitions} partitions)"
                )
            return self._accumulator.append(
                topic, partition, timestamp_ms, key, value, encoded, on_done, trace_context
            )
        finally:
            if span is not None:
                span.end()

    def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> RecordFutures:
        """Queue many records of one topic at once: `values[i]` with `keys[i]` (no keys: None),
        all with the same timestamp (default now) and no headers; each partitioned as `send`
        would. Much cheaper per record than `send` in a loop: no future per record (the result
        is one `RecordFutures`, a sequence whose items are made when looked at) and whole runs
        of records added to a batch at once. `callback(metadata, exception)` runs for every
        record. Blocks and raises as `send`."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        if self._key_serializer is not None and keys is not None:
            keys = [self._key_serializer(k) for k in keys]
        if self._value_serializer is not None:
            values = [self._value_serializer(v) for v in values]
        values = _as_bytes_column(values, "value")
        if keys is not None:
            keys = _as_bytes_column(keys, "key")
            if keys.count(None) == len(keys):
                keys = None
        if values and max(map(len, filter(None, values)), default=0) > self._max_record:
            raise RecordTooLargeError(
                f"a record is larger than max.request.size or buffer.memory ({self._max_record})"
            )
        info = self._topics.get(topic)
        if info is None or info.expires_at < _monotonic():
            info = self._topic_info(topic)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        elif not -1 <= timestamp_ms <= _INT64_MAX:
            raise ValueError(f"invalid timestamp {timestamp_ms}")
        n = info.num_partitions
        partition_of: Sequence[int] | None = None
        if partition is not None:
            if not 0 <= partition < n:
                raise ValueError(
                    f"partition {partition} of topic {topic!r} does not exist ({n} partitions)"
                )
            partition_of = [partition] * len(values)
        elif keys is not None and not self._ignore_keys:
            partition_of = [
                random.randrange(n) if k is None else (murmur2(k) & 0x7FFFFFFF) % n for k in keys
            ]
        on_done = None if callback is None else delivery_callback(callback)
        return self._accumulator.append_many(
            topic,
            info.available or range(n),
            partition_of,
            timestamp_ms,
            keys,
            values,
            on_done,
        )

    def metrics(self) -> dict[str, float]:
        """Kafka's produce-throttle-time-avg / -max (ms, over the last minute of responses);
        and the direct path's counts (decision 0047): direct-request-total (produce requests
        sent to a leader's direct port), direct-grant-total (grants taken, renewals included),
        direct-renewal-total."""
        metrics = self._conn.throttle.metrics("produce")
        direct = self._sender.direct
        metrics["direct-request-total"] = 0 if direct is None else direct.requests
        metrics["direct-grant-total"] = 0 if direct is None else direct.grants
        metrics["direct-renewal-total"] = 0 if direct is None else direct.renewals
        return metrics

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, waiting up to max.block.ms for the topic to appear."""
        info = self._metadata.partitions(topic, self._max_block_ms)
        return list(range(info.num_partitions))

    def flush(self, timeout: float | None = None) -> None:
        """Send every record queued so far at once (ignoring linger.ms) and wait until each has
        its outcome, success or failure (check the futures). Raises ClientTimeoutError if
        `timeout` seconds pass first."""
        results = self._accumulator.begin_flush()
        try:
            deadline = None if timeout is None else _monotonic() + timeout
            for result in results:
                remaining = None if deadline is None else max(deadline - _monotonic(), 0.0)
                if not result.event.wait(remaining):
                    raise ClientTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Refuse new sends, deliver what is pending, stop the sender and close the channels.

        Waits up to `timeout` seconds (None: until done); records still pending then fail with
        ClientClosedError. Idempotent; must not be called from a send callback.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        results = self._accumulator.close()
        self._sender.initiate_close()
        deadline = None if timeout is None else _monotonic() + timeout
        for result in results:
            remaining = None if deadline is None else max(deadline - _monotonic(), 0.0)
            if not result.event.wait(remaining):
                break
        if self._accumulator.has_incomplete():
            self._sender.force_close()
        self._sender.join(None if deadline is None else max(deadline - _monotonic(), 1.0))
        error = ClientClosedError("producer", "closed before delivery")
        for batch in self._accumulator.abort_queued():
            batch.result.complete(-1, -1, error)
            self._accumulator.release(batch)
        self._conn.close()

    def __repr__(self) -> str:
        return f"<Producer {self.client_id} → {','.join(self._conn.servers)}>"


def _as_bytes_column(column: Sequence[Any], what: str) -> list[bytes | None]:
    """The keys or values of `send_many` as bytes or None (bytearray, memoryview copied)."""
    if set(map(type, column)) <= _BYTES_OR_NONE:
        return column if isinstance(column, list) else list(column)
    return [as_bytes(item, what) for item in column]


_BYTES_OR_NONE = frozenset({bytes, type(None)})
