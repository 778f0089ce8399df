"""`AIOProducer`: the `Producer` for asyncio applications, a thin layer over the sync one.

Everything a record goes through (config, serializers, partitioner, accumulator, sender thread,
idempotence, transactions, errors) is the sync producer's own; this module only decides where
each call runs and turns its results into awaitables (decision 0037). `send` appends on the event
loop when that cannot wait (metadata cached, buffer.memory free), which is the common case and
costs no thread hop; otherwise it runs on the producer's worker thread (`Lane`), as do `flush`,
`close` and the transactional calls, which wait on the network. Delivery outcomes come back
through `DeliveryBridge`: one loop wake-up per batch.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from riverlog.common.records.record import Header

from .._closing import AsyncClosing
from ..producer import Producer, RecordFuture, RecordMetadata
from ..producer.idempotence import ProducerIdAndEpoch
from ._delivery import DeliveryBridge
from ._lane import Lane
from ._wrap import awaitable

T = TypeVar("T")


class AIOProducer(AsyncClosing):
    """Sends records to topics from coroutines; same configuration, errors and delivery
    semantics as `Producer` (it is one, underneath).

        async with AIOProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
            metadata = await producer.send("events", b"value", key=b"key")

    Use it from one event loop (the one of its first call). Lifecycle: created → sending →
    `await close()` (also on leaving `async with`), which delivers what is pending first.
    Bad configuration raises ConfigError from the constructor, as `Producer`'s.
    """

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self._producer = Producer(conf, **kwargs)
        self.config = self._producer.config
        self._lane = Lane(f"{self._producer.client_id}-aio")
        self._bridge: DeliveryBridge | None = None
        self._closed = False

    @property
    def client_id(self) -> str:
        return self._producer.client_id

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch | None:
        """As `Producer.producer_id_and_epoch`."""
        return self._producer.producer_id_and_epoch

    def _delivery(self) -> DeliveryBridge:
        bridge = self._bridge
        if bridge is None:
            self._bridge = bridge = DeliveryBridge(asyncio.get_running_loop())
        return bridge

    # ---- sending ----------------------------------------------------------------------------

    def send_nowait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record and return at once a future of its `RecordMetadata` (await it, or
        gather many: sending many records before awaiting any lets them share batches).

        Arguments and errors as `Producer.send`. When the record can be appended without waiting
        (the usual case), argument errors raise here; otherwise the record goes through the
        worker thread, waiting up to max.block.ms for metadata or buffer memory, and the future
        carries any error. Records keep the order of the calls either way."""
        bridge = self._delivery()
        if self._appends_at_once(topic, value, key, headers):
            return bridge.watch(
                self._producer.send(topic, value, key, headers, partition, timestamp_ms)
            )
        queued = self._append_on_worker(topic, value, key, headers, partition, timestamp_ms)
        return asyncio.ensure_future(self._deliver(queued, bridge))

    def _appends_at_once(
        self, topic: str, value: Any, key: Any, headers: Sequence[Header] | None
    ) -> bool:
        """Whether `Producer.send` can run on the loop: it cannot wait (or the producer is
        closed: it raises ClientClosedError at once) and no send queued on the worker is
        still to come before it."""
        return self._closed or (
            self._lane.idle and self._producer._can_send_at_once(topic, value, key, headers)
        )

    def _append_on_worker(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Sequence[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> asyncio.Future[RecordFuture]:
        call = functools.partial(
            self._producer.send, topic, value, key, headers, partition, timestamp_ms
        )
        return asyncio.wrap_future(self._lane.submit(call))

    @staticmethod
    async def _deliver(
        queued: asyncio.Future[RecordFuture], bridge: DeliveryBridge
    ) -> RecordMetadata:
        return await bridge.watch(await queued)

    async def _accept(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """The record appended as `Producer.send` appends it (raising what it raises: bad
        arguments, max.block.ms run out, a transaction state), then the future of its delivery.
        `send_nowait` folds both outcomes into one future; the sync SDK's behavioural tests run
        on this SDK through this call, which keeps "not accepted" apart from "not delivered"
        as `Producer.send` and its future do (tests/integration/sdk_flavours.py)."""
        bridge = self._delivery()
        if self._appends_at_once(topic, value, key, headers):
            record = self._producer.send(topic, value, key, headers, partition, timestamp_ms)
        else:
            record = await self._append_on_worker(
                topic, value, key, headers, partition, timestamp_ms
            )
        return bridge.watch(record)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its outcome: its `RecordMetadata`, or the delivery
        error `Producer.send(...).result()` would raise. Awaiting each record in turn sends one
        batch per record; for throughput use `send_nowait` and gather."""
        return await self.send_nowait(topic, value, key, headers, partition, timestamp_ms)

    async def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> list[RecordMetadata]:
        """As `Producer.send_many` (many records of one topic at once, much cheaper per record
        than `send`), awaiting every record's metadata (in order) or the first delivery error.
        The records are appended on the worker thread (they may need much buffer.memory)."""
        call = functools.partial(
            self._producer.send_many,
            topic,
            values,
            keys,
            partition=partition,
            timestamp_ms=timestamp_ms,
        )
        futures = await self._call(call)
        bridge = self._delivery()
        # One waiter per batch run: the first record of each stands for its batch.
        await asyncio.gather(
            *(bridge.watch(future) for future in futures.runs()), return_exceptions=True
        )
        return futures.result(0)  # the first error in record order, as the sync one

    @property
    def _sync(self) -> Producer:
        return self._producer

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            return fn()  # the sync producer raises ClientClosedError (or has nothing to do)
        return await self._lane.run(fn)

    flush = awaitable(Producer.flush)
    partitions_for = awaitable(Producer.partitions_for)

    def metrics(self) -> dict[str, float]:
        """As `Producer.metrics` (no I/O)."""
        return self._producer.metrics()

    # ---- transactions: on the worker, after every send queued there -------------------------

    init_transactions = awaitable(Producer.init_transactions)
    begin_transaction = awaitable(Producer.begin_transaction)
    send_offsets_to_transaction = awaitable(Producer.send_offsets_to_transaction)
    commit_transaction = awaitable(Producer.commit_transaction)
    abort_transaction = awaitable(Producer.abort_transaction)

    # ---- lifecycle --------------------------------------------------------------------------

    async def close(self, timeout: float | None = None) -> None:
        """As `Producer.close`: deliver what is pending (records still pending after `timeout`
        fail with ClientClosedError, their futures too), then stop. Idempotent."""
        if self._closed:
            return
        try:
            await self._lane.run(functools.partial(self._producer.close, timeout))
        finally:
            self._closed = True
            self._lane.shutdown()

    def __repr__(self) -> str:
        return f"<AIOProducer over {self._producer!r}>"
