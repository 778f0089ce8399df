"""FetchStream's pushed answers (decision 0019, push addendum; the pure parts are in
`pushes.py`).

After a request with `push_credit` is answered, each of its caught-up partitions gets a task
that fetches it again from the answer's next offset, with the request's options (max_wait_ms,
min_bytes, isolation, rack), through the same path as a request (`fetch_results`: quota hold
and charge, ACL check, leader routing), and pushes the answer the moment it comes, as long as
the credit lasts and the partition stays caught up. A push that found the client throttled,
an error (leader moved, not authorized...) or records left to read ends the pushes of its
partition (push_credit 0 in it); so does a later request naming the partition, which replaces
them (`PushTable`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2

from ..context import RequestContext
from ..fetch import FetchPartResult
from ..pushes import PushCredit, PushTable, next_push
from . import convert

log = logging.getLogger(__name__)

FetchResults = Callable[
    [RequestContext, data_pb2.FetchRequest],
    Coroutine[Any, Any, tuple[list[FetchPartResult], int]],
]
"""A fetch through the request path: the results (none while the client is held) and the
throttle time to answer with."""


class FetchPushes:
    """One FetchStream's pushes. `send` puts a serialized answer on the stream."""

    def __init__(
        self,
        new_context: Callable[[], RequestContext],
        fetch_results: FetchResults,
        send: Callable[[bytes], None],
    ) -> None:
        self._new_context = new_context
        self._fetch_results = fetch_results
        self._send = send
        self.table = PushTable()

    def claim(self, request: data_pb2.FetchRequest) -> dict[TopicPartition, int]:
        """A request arrived: it replaces the pushes of the partitions it names, and stops
        those of its forgotten partitions."""
        if request.forgotten_partitions:
            self.table.claim(
                TopicPartition(p.topic, p.partition) for p in request.forgotten_partitions
            )
        return self.table.claim(TopicPartition(p.topic, p.partition) for p in request.partitions)

    def answer(
        self,
        request: data_pb2.FetchRequest,
        claimed: dict[TopicPartition, int],
        results: Sequence[FetchPartResult],
        throttle: int,
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Start the pushes that follow the answer of `request` (`results`); (push credit,
        push offset) of each partition pushed, for the answer."""
        if request.push_credit <= 0 or throttle > 0 or not results:
            return {}
        offsets = {TopicPartition(p.topic, p.partition): p for p in request.partitions}
        read_committed = request.isolation_level == common_pb2.READ_COMMITTED
        started: dict[TopicPartition, tuple[int, int]] = {}
        for r in results:
            part = offsets.get(r.tp)
            generation = claimed.get(r.tp)
            if part is None or generation is None or not self.table.current(r.tp, generation):
                continue
            offset = next_push(
                r.error_code,
                r.records,
                part.fetch_offset,
                r.high_watermark,
                r.last_stable_offset,
                read_committed,
            )
            if offset is None:
                continue
            credit = PushCredit(request.push_credit, request.max_bytes or 2**31 - 1)
            credit.max_bytes -= len(r.records)
            if credit.left() <= 0:
                continue
            task = asyncio.create_task(
                self._push(request, part, offset, credit, generation, read_committed)
            )
            self.table.start(r.tp, task)
            started[r.tp] = (credit.left(), offset)
        return started

    async def _push(
        self,
        request: data_pb2.FetchRequest,
        part: data_pb2.FetchPartition,
        offset: int,
        credit: PushCredit,
        generation: int,
        read_committed: bool,
    ) -> None:
        tp = TopicPartition(part.topic, part.partition)
        # The one-partition request of every push, built once: each push only moves its
        # offset and puts back the max bytes the quota check may have lowered in place
        # (`before_fetch`); nothing else on the request path changes or keeps it.
        one = data_pb2.FetchRequest()
        one.CopyFrom(request)
        del one.partitions[:]
        p = one.partitions.add()
        p.CopyFrom(part)
        max_bytes = request.max_bytes
        try:
            while True:
                p.fetch_offset = offset
                one.max_bytes = max_bytes
                ctx = self._new_context()
                results, throttle = await ctx.work.run(self._fetch_results(ctx, one))
                if not self.table.current(tp, generation):
                    return  # replaced meanwhile: the client asked again, this answer is not sent
                if not results:  # held by the quota: no pushes while throttled
                    results = [FetchPartResult(tp, high_watermark=-1)]
                r = results[0]
                left = credit.spend(len(r.records))
                following = None
                if left > 0 and throttle == 0:
                    following = next_push(
                        r.error_code,
                        r.records,
                        offset,
                        r.high_watermark,
                        r.last_stable_offset,
                        read_committed,
                    )
                pushes = {tp: (left, following)} if following is not None else None
                self._send(
                    convert.fetch_to_wire(
                        results, request.correlation_id, throttle, pushes, pushed_from=offset
                    )
                )
                if following is None:
                    return
                offset = following
        except asyncio.CancelledError:
            raise
        except Exception:  # the client's own fetch finds the error; it waits for none here
            log.debug("pushing %s failed", tp, exc_info=True)
            if not self.table.current(tp, generation):
                return  # replaced meanwhile: the new chunk is not this push's to end
            self._send(
                convert.fetch_to_wire(
                    [FetchPartResult(tp, high_watermark=-1)],
                    request.correlation_id,
                    0,
                    None,
                    pushed_from=offset,
                )
            )
