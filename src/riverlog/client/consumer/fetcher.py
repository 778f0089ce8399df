"""The consumer's fetch pipeline: several fetches in flight per partition while the application
works through the records already here, as Kafka's consumer prefetches.

One fetch at a time per partition left the consumer paced by the round trip of a 1 MiB answer
through the gateway and storage (issue 10). So each partition keeps a chain of chunks in offset
order (`chunk.py`): the one being drained, answers waiting, and fetches in flight, up to
`_depth` of them, which shares fetch.max.bytes among the assigned partitions (2 to
`MAX_CHUNKS`; with many partitions it is the old bound of one chunk draining and one fetched).
Each fetch asks max.partition.fetch.bytes, or when that is not set 4 MiB for a consumer of few
partitions, else Kafka's 1 MiB (`config.partition_fetch_bytes`, decision 0046): with one
partition up to MAX_CHUNKS x 4 MiB = 16 MiB is in flight or buffered.
The next fetch of a partition starts where the chain ends; while the last chunk is still in
flight its end is estimated from the span (in offsets) of the last full answer, and such a
fetch is only sent below the partition's known high watermark (so a consumer at the end of the
log keeps one long-polling fetch per partition, as before). A wrong guess costs little: an
overlap is cut at decode (records below the position are skipped), and a gap is fetched by a
fill-in request, sized to the gap, before the chunks after it are drained (an overlap costs
bytes the gateway sends twice, a gap only a small request, so the guess leans long: the larger
of the last two spans). Errors of a chunk ahead of the position drop it and the chunks after
it; they are reported when the fetch at the position meets them.

A round of fetches goes as one request per partition leader (Kafka's consumer sends one per
broker), from the leaders in the client's metadata: a request spanning several leaders is
answered as a whole, so a record on one leader waited for the gateway to cut the other
leaders' long polls short and ask them again (at 1,000 records/s over 6 partitions on 3 nodes,
end-to-end latency was twice that of one partition, decision 0019). Leaders are a hint: a stale
one costs the gateway a fan-out, and partitions of unknown leader share one request.

With fetch.push.credit, an answer that reached the end of a partition can say the gateway
will push the next one unasked (`pushes.py`): the partition then waits on a chunk with no
request behind it, and sends no fetch of its own until that chunk is filled, given up, or the
position moves (decision 0019, push addendum).

Answers are read on the consumer's thread; gRPC threads only queue the finished futures (and
the pushed answers, as (gateway index, answer) pairs).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2

from .._connection import GatewayConnection, rpc_error
from .._fetch_answer import records_of
from .._grants import READ, GrantKeeper, GrantSettings, gateway_asker
from .._metadata import MetadataCache
from ..config import ConsumerConfig, partition_fetch_bytes
from ..errors import OffsetOutOfRangeError
from .chunk import Chunk, ConsumerRecord
from .direct import DirectLinks
from .pushes import AwaitedPushes
from .subscription import NONE, PartitionState, SubscriptionState

__all__ = ["MAX_CHUNKS", "ConsumerRecord", "Fetcher", "by_leader"]

_T = TypeVar("_T")

MAX_CHUNKS = 4
"""Chunks per partition at most: one draining, the rest answered or in flight."""
FILL_SLACK = 64 * 1024
"""Bytes a gap-filling fetch asks for beyond the gap's estimated size (at most a quarter of
max.partition.fetch.bytes)."""
METADATA_RETRY_S = 1.0
"""After a look-up of leaders that failed or left a topic unknown, fetches go without them this
long before the next try."""


def by_leader(items: Iterable[_T], leader_of: Callable[[_T], int]) -> list[list[_T]]:
    """`items` split into one group per leader (`leader_of` gives a node id, -1 unknown), in
    the order each leader first appears; the items of unknown leader form one group."""
    groups: dict[int, list[_T]] = {}
    for item in items:
        groups.setdefault(leader_of(item), []).append(item)
    return list(groups.values())


class Fetcher:
    """Issues fetches and buffers their answers. Used by the consumer's thread only, except the
    done-callbacks of the gRPC futures (they append to `_answered` and set `_wakeup`)."""

    def __init__(
        self,
        config: ConsumerConfig,
        conn: GatewayConnection,
        subscriptions: SubscriptionState,
        metadata: MetadataCache | None = None,
    ) -> None:
        self._config = config
        self._conn = conn
        self._subs = subscriptions
        self._metadata = metadata  # None: every round of fetches in one request
        self._metadata_retry_at = 0.0
        self._read_committed = config.isolation_level == "read_committed"
        self._isolation = (
            common_pb2.READ_COMMITTED if self._read_committed else common_pb2.READ_UNCOMMITTED
        )
        self._timeout_s = (config.request_timeout_ms + config.fetch_max_wait_ms) / 1000
        self._backoff_s = config.retry_backoff_ms / 1000
        self._chains: dict[TopicPartition, deque[Chunk]] = {}
        self._ready: deque[Chunk] = deque()  # answered chunks, in arrival order
        self._requests: dict[Any, tuple[int, dict[TopicPartition, Chunk]]] = {}
        self._answered: deque[Any] = deque()  # futures done, pushes, appended by gRPC threads
        self._pushes = AwaitedPushes()
        self._wakeup = threading.Event()
        self._spans: dict[TopicPartition, int] = {}  # the guessed offsets of a full answer
        self._last_spans: dict[TopicPartition, int] = {}
        self._density: dict[TopicPartition, float] = {}  # its bytes per offset
        self._full_fills: set[TopicPartition] = set()  # a small fill met a larger batch
        self._ends: dict[TopicPartition, int] = {}  # high watermark (LSO if read_committed)
        self._key_deserializer = config.key_deserializer
        self._value_deserializer = config.value_deserializer
        self._direct: DirectLinks | None = None  # fetches straight to the leaders (0047)
        if config.direct_access and metadata is not None and not config.client_rack:
            # A grant on its way never holds poll(): the fetch goes through the gateway
            # this time (so no wake-up is needed when it comes).
            keeper = GrantKeeper(
                gateway_asker(conn, READ, config.request_timeout_ms / 1000),
                GrantSettings(
                    renew_fraction=0.5,
                    expiry_slack_s=1.0,
                    fallback_s=config.metadata_max_age_ms / 1000,
                    backoff_s=max(config.retry_backoff_ms, 1) / 1000,
                    backoff_max_s=config.retry_backoff_max_ms / 1000,
                ),
            )
            self._direct = DirectLinks(keeper, self._timeout_s, config.request_timeout_ms / 1000)

    # ---- sending ------------------------------------------------------------------------

    def partition_fetch_bytes(self) -> int:
        """max.partition.fetch.bytes for the next fetches: the key if set, else chosen from the
        partitions assigned now (`config.partition_fetch_bytes`); chunks already sent keep
        theirs."""
        config = self._config
        return partition_fetch_bytes(
            config.max_partition_fetch_bytes, config.fetch_max_bytes, len(self._subs.partitions)
        )

    def _depth(self, full: int) -> int:
        share = full * max(len(self._subs.partitions), 1)
        return max(2, min(MAX_CHUNKS, self._config.fetch_max_bytes // share))

    def _plan(
        self, tp: TopicPartition, state: PartitionState, depth: int, full: int
    ) -> tuple[int, int, int] | None:
        """(offset, chain index, max bytes) of the next chunk to fetch for `tp`, or None for
        none now; `full` is max.partition.fetch.bytes. A gap is fetched with about its own
        size, so the fill does not fetch again what the chunk after it holds."""
        assert state.position is not None
        chain = self._chains.get(tp)
        if chain is None or (chain and chain[0].epoch != state.epoch):
            chain = self._chains[tp] = deque()
        end = state.position
        known = True  # False: `end` is a guess (the last chunk is still in flight)
        for i, chunk in enumerate(chain):
            if known and chunk.start > end:  # a gap before this chunk: fill it first
                density = self._density.get(tp)
                if density is None or tp in self._full_fills:
                    return end, i, full
                slack = min(FILL_SLACK, full // 4)
                return end, i, min(full, int((chunk.start - end) * density) + slack)
            if chunk.done:
                end = max(end, chunk.next_offset) if known else chunk.next_offset
                known = True
            else:
                span = self._spans.get(tp)
                if span is None:
                    return None
                end = chunk.fetch_offset + span
                known = False
        if len(chain) >= depth or (not known and end >= self._ends.get(tp, -1)):
            return None
        return end, len(chain), full

    def send_fetch(self) -> bool:
        """Send fetches for every partition that can take one more chunk. True if any went."""
        if self._conn.throttle_remaining_s() > 0:
            return False  # none to a gateway that asked for a pause (quota)
        self._prune()
        config = self._config
        fetchable = self._subs.fetchable()
        full = self.partition_fetch_bytes()
        depth = self._depth(full)
        sent = False
        leader_of = self._leader_hints(fetchable)
        while True:
            planned: list[Chunk] = []
            for tp in fetchable:
                state = self._subs.partitions[tp]
                plan = self._plan(tp, state, depth, full)
                if plan is None:
                    continue
                offset, index, max_bytes = plan
                chunk = Chunk(tp, state.epoch, offset, max_bytes, full)
                self._chains[tp].insert(index, chunk)
                planned.append(chunk)
            if not planned:
                return sent
            for group in by_leader(planned, leader_of):
                push_credit = config.fetch_push_credit
                if self._direct is not None:
                    if self._send_direct(leader_of(group[0]), group):
                        continue
                    if self._direct.grant_pending:
                        push_credit = 0  # this once: the next fetch goes direct, not pushes
                request = self._fetch_request(group)
                request.rack_id = (
                    config.client_rack
                )  # the gateway may read from this rack's replica
                request.push_credit = push_credit
                self._drop_pushes(
                    group
                )  # this fetch replaces the partition's pushes at the gateway
                future, server = self._conn.submit("Fetch", request, self._timeout_s, self._on_push)
                self._requests[future] = (server, {c.tp: c for c in group})
                future.add_done_callback(self._on_done)
            sent = True

    def _send_direct(self, leader: int, group: list[Chunk]) -> bool:
        """Send `group`'s fetch to its leader's direct port; False: send it to the gateway (no
        leader known, or no direct access to it now)."""
        direct = self._direct
        if direct is None:
            return False
        direct.grant_pending = False
        if leader < 0:
            return False
        config = self._config
        request = self._fetch_request(group)
        ends = self._ends
        may_wait = config.fetch_max_wait_ms > 0 and (
            config.fetch_min_bytes > 1 or any(c.fetch_offset >= ends.get(c.tp, -1) for c in group)
        )
        topics = {c.tp.topic for c in group}
        call = direct.submit(leader, request, topics, may_wait, self._answered.append)
        if call is None:
            return False
        self._drop_pushes(group)  # the gateway's pushes of these partitions are no longer awaited
        self._requests[call] = (-1, {c.tp: c for c in group})
        return True

    def _fetch_request(self, group: list[Chunk]) -> data_pb2.FetchRequest:
        """The fetch of `group`'s chunks, as the gateway and a leader's direct port take it."""
        config = self._config
        return data_pb2.FetchRequest(
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            isolation_level=self._isolation,
            partitions=[
                data_pb2.FetchPartition(
                    topic=c.tp.topic,
                    partition=c.tp.partition,
                    fetch_offset=c.fetch_offset,
                    partition_max_bytes=c.max_bytes,
                )
                for c in group
            ],
        )

    def _drop_pushes(self, group: list[Chunk]) -> None:
        for c in group:
            awaited = self._pushes.drop(c.tp)
            if awaited is not None:
                self._truncate(awaited)

    def _leader_hints(self, fetchable: Iterable[TopicPartition]) -> Callable[[Chunk], int]:
        """How to tell a chunk's leader: from the metadata, looked up first for topics not
        known or stale (a failed look-up leaves them unknown for METADATA_RETRY_S)."""
        cache = self._metadata
        if cache is None or self._config.client_rack:  # a rack: the gateway picks replicas
            return lambda chunk: -1
        stale = {tp.topic for tp in fetchable if cache.get(tp.topic) is None}
        now = time.monotonic()
        if stale and now >= self._metadata_retry_at:
            try:
                found = cache.refresh(sorted(stale))
            except RiverlogError:
                found = {}
            if not stale.issubset(found):  # not now, not at every round: a look-up is an RPC
                self._metadata_retry_at = now + METADATA_RETRY_S
        leader = cache.leader
        return lambda chunk: leader(chunk.tp.topic, chunk.tp.partition)

    def _on_done(self, future: Any) -> None:
        self._answered.append(future)
        self._wakeup.set()
        if self._direct is not None:
            self._direct.wake()

    def _on_push(self, server: int, response: Any) -> None:
        self._answered.append((server, response))
        self._wakeup.set()
        if self._direct is not None:
            self._direct.wake()

    @property
    def in_flight(self) -> bool:
        return bool(self._requests or self._pushes)

    # ---- receiving ----------------------------------------------------------------------

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a fetch in flight to finish, buffer the answers that are
        in and send the next fetches. False if none finished (or none was in flight). Raises
        the errors poll() must report."""
        if not self._requests and not self._pushes:
            return False
        self._conn.expire()
        direct = self._direct
        if direct is not None and direct.pending:
            direct.pump(self._answered.append)
            if not self._answered:
                direct.wait(max(timeout_s, 0.0), self._answered.append, self._answered)
        elif not self._answered:
            self._wakeup.clear()
            if not self._answered:
                self._wakeup.wait(max(timeout_s, 0.0))
        if not self._answered:
            return False
        self._take_answers()
        self.send_fetch()
        return True

    def _take_answers(self) -> None:
        while self._answered:
            future = self._answered.popleft()
            if isinstance(future, tuple):
                self._take_push(*future)
                continue
            entry = self._requests.pop(future, None)
            if entry is not None:
                self._take(future, *entry)

    def _take_push(self, server: int, response: Any) -> None:
        """A pushed answer: it fills the chunk waiting for it, or is dropped as stale. None:
        the stream that carried the pushes ended, so none will come."""
        if response is None:
            for chunk in self._pushes.clear():
                self._truncate(chunk)
            return
        self._conn.throttle.record(server, response.throttle_time_ms)
        chunks: dict[TopicPartition, Chunk] = {}
        partitions = self._subs.partitions
        unwanted: list[TopicPartition] = []
        for answer in response.partitions:
            tp = TopicPartition(answer.topic, answer.partition)
            state = partitions.get(tp)
            filled = self._pushes.take(
                tp, answer.fetch_offset, None if state is None else state.epoch
            )
            if filled is not None and answer.high_watermark < 0 and not answer.error_code:
                self._truncate(filled)  # the push found the client held: nothing read, ask again
            elif filled is not None:
                chunks[tp] = filled
            elif answer.push_credit > 0 and not self._expecting(tp):
                unwanted.append(tp)
        if unwanted:
            self._forget(server, unwanted)
        if not chunks:
            return
        try:
            self._handle(response, chunks)
        finally:
            for chunk in chunks.values():
                if not chunk.done and not self._pushes.waiting(chunk):
                    self._truncate(chunk)

    def _expecting(self, tp: TopicPartition) -> bool:
        """Whether an answer for `tp` may still come: a chunk waits for a push, or a fetch
        naming it is in flight (its answer may announce pushes, and it replaces the old ones)."""
        if self._pushes.waiting_for(tp):
            return True
        return any(tp in chunks for _, chunks in self._requests.values())

    def _forget(self, server: int, tps: list[TopicPartition]) -> None:
        """Stop the pushes of `tps`, which this consumer no longer waits for (revoked, or no
        room for them): a request that fetches nothing (Kafka's forgotten partitions). Sent
        only while nothing for them is expected, so it cannot stop pushes the consumer waits
        for."""
        request = data_pb2.FetchRequest(
            push_credit=self._config.fetch_push_credit,
            forgotten_partitions=[
                data_pb2.FetchPartition(topic=tp.topic, partition=tp.partition) for tp in tps
            ],
        )
        self._conn.submit("Fetch", request, self._timeout_s, self._on_push)  # answer unused

    def _await_push(self, chunk: Chunk, answer: data_pb2.FetchPartitionResponse) -> bool:
        """After `chunk`'s answer: wait for the push the answer announces, if it continues the
        chain (it does unless the partition's fetches went past it). True if waiting."""
        if answer.push_credit <= 0:
            return False
        chain = self._chains.get(chunk.tp)
        if chain is None or chain[-1] is not chunk:
            return False
        deadline = time.monotonic() + self._timeout_s
        if not chunk.done:  # nothing new yet: the gateway goes on waiting at the same offset
            if answer.push_offset != chunk.fetch_offset:
                return False
            self._pushes.expect(chunk, deadline)
            return True
        if (
            answer.push_offset != chunk.next_offset
            or len(chain) >= self._depth(chunk.full)  # within fetch.max.bytes, as fetches
            or chunk.full != self.partition_fetch_bytes()  # the assignment changed the size
        ):
            return False
        following = Chunk(chunk.tp, chunk.epoch, answer.push_offset, chunk.max_bytes, chunk.full)
        chain.append(following)
        self._pushes.expect(following, deadline)
        return True

    def _take(self, future: Any, server: int, chunks: dict[TopicPartition, Chunk]) -> None:
        try:
            response = future.result(timeout=0)
        except Exception as e:
            for chunk in chunks.values():
                self._truncate(chunk)
            if isinstance(e, grpc.FutureCancelledError):
                return
            error = rpc_error(e)
            if isinstance(e, grpc.RpcError) and GatewayConnection.should_failover(e):
                self._conn.failover(server)
            if not error.retriable:
                raise error from None
            backoff = time.monotonic() + self._backoff_s
            for tp in chunks:
                state = self._subs.partitions.get(tp)
                if state is not None:
                    state.backoff_until = backoff
            return
        if server >= 0:  # (a direct answer's throttle is its grant's, `GrantKeeper`)
            self._conn.throttle.record(server, response.throttle_time_ms)
        try:
            self._handle(response, chunks)
        finally:
            for chunk in chunks.values():
                if not chunk.done and not self._pushes.waiting(chunk):
                    self._truncate(chunk)  # errors, stale answers, or none for it at all

    def _handle(self, response: Any, chunks: dict[TopicPartition, Chunk]) -> None:
        """`response`: a FetchStream's `FetchAnswer`, or a unary Fetch's FetchResponse."""
        out_of_range: dict[TopicPartition, int] = {}
        failure: RiverlogError | None = None
        for index, answer in enumerate(response.partitions):
            tp = TopicPartition(answer.topic, answer.partition)
            chunk = chunks.get(tp)
            state = self._subs.partitions.get(tp)
            chain = self._chains.get(tp)
            if chunk is None or state is None or chunk.epoch != state.epoch:
                continue  # unassigned or seeked since: a stale answer
            if chain is None or chunk not in chain:
                continue  # dropped since (an error before it, or a clear)
            at_position = chain[0] is chunk
            code = int(answer.error_code)
            if code == ErrorCode.NONE:
                state.high_watermark = answer.high_watermark
                state.log_start_offset = answer.log_start_offset
                lso = answer.last_stable_offset
                stable = self._read_committed and lso >= 0
                self._ends[tp] = lso if stable else answer.high_watermark
                data, start, end = records_of(response, index)
                if stable and chunk.fetch_offset >= lso:
                    end = start  # nothing stable yet: wait as at the end of the log
                size = end - start
                full = chunk.full  # as sent: the assignment may have changed it since
                if chunk.answer(
                    data,
                    lso if stable else None,
                    [(a.producer_id, a.first_offset) for a in answer.aborted_transactions]
                    if stable
                    else (),
                    start,
                    end,
                ):
                    self._full_fills.discard(tp)
                    if size * 2 >= full:
                        span = chunk.next_offset - chunk.fetch_offset
                        self._spans[tp] = max(span, self._last_spans.get(tp, 0))
                        self._last_spans[tp] = span
                        self._density[tp] = size / max(chunk.next_offset - chunk.start, 1)
                    self._ready.append(chunk)
                    self._await_push(chunk, answer)
                    continue
                if self._await_push(chunk, answer):
                    continue
                if chunk.max_bytes < full:
                    # A gap-sized fill met a larger batch (answered cut, or empty as storage
                    # answers all but a request's first partition): ask again in full.
                    self._full_fills.add(tp)
                    chain.remove(chunk)  # only this chunk: the ones after it stand
                elif not at_position:
                    self._spans.pop(tp, None)  # a guess found nothing: stop guessing for now
                elif size:
                    failure = RiverlogError(
                        f"{tp}: the batch at offset {chunk.fetch_offset} is larger than "
                        f"max.partition.fetch.bytes ({full})",
                        ErrorCode.MESSAGE_TOO_LARGE,
                    )
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                if not at_position:
                    continue  # ahead of the position: the fetch at the position will tell
                self._drop(tp)
                if self._subs.default_reset == NONE:
                    out_of_range[tp] = chunk.fetch_offset
                else:
                    state.request_reset(self._subs.default_reset)
            elif code == ErrorCode.DELEGATION_TOKEN_EXPIRED:
                continue  # a direct fetch's grant ran out: fetched again under a new one
            else:
                error = error_for(code, answer.error_message)
                if error.refresh_metadata and self._metadata is not None:
                    self._metadata.invalidate(tp.topic)  # the leader moved: group anew
                if error.retriable:
                    state.backoff_until = time.monotonic() + self._backoff_s
                elif at_position:
                    failure = RiverlogError(f"{tp}: {error.message}", error.code)
        if out_of_range:
            raise OffsetOutOfRangeError(out_of_range)
        if failure is not None:
            raise failure

    def _truncate(self, chunk: Chunk) -> None:
        """Drop `chunk` and every chunk after it in its partition's chain."""
        chain = self._chains.get(chunk.tp)
        if chain is None or chunk not in chain:
            return
        while chain.pop() is not chunk:
            pass

    def _drop(self, tp: TopicPartition) -> None:
        self._pushes.drop(tp)
        self._chains.pop(tp, None)
        self._spans.pop(tp, None)
        self._full_fills.discard(tp)

    def _prune(self) -> None:
        """Forget chains of partitions no longer assigned or seeked since (revoked partitions'
        prefetched records go here)."""
        if self._pushes:
            for chunk in self._pushes.expired(time.monotonic()):
                self._truncate(chunk)  # no push in time: the partition fetches again
        partitions = self._subs.partitions
        stale = []
        for tp, chain in self._chains.items():
            state = partitions.get(tp)
            if state is None or (chain and chain[0].epoch != state.epoch):
                stale.append(tp)
        for tp in stale:
            self._drop(tp)

    def clear(self, tp: TopicPartition | None = None) -> None:
        """Forget buffered and in-flight chunks (of `tp`, or all): after a seek or a new
        assignment. Answers still to come for them are ignored."""
        if tp is None:
            self._pushes.clear()
            self._chains.clear()
            self._spans.clear()
            self._full_fills.clear()
            self._ready.clear()
        else:
            self._drop(tp)

    # ---- draining -----------------------------------------------------------------------

    def _next_ready(self) -> Chunk | None:
        """The first answered chunk, in arrival order, that is at its partition's position."""
        ready = self._ready
        partitions = self._subs.partitions
        i = 0
        while i < len(ready):
            chunk = ready[i]
            chain = self._chains.get(chunk.tp)
            state = partitions.get(chunk.tp)
            if (
                chain is None
                or state is None
                or state.position is None
                or state.epoch != chunk.epoch
                or chunk not in chain
            ):
                del ready[i]  # unassigned, seeked or dropped since it was fetched
                continue
            if chain[0] is chunk and chunk.start <= state.position:
                if chunk.next_offset > state.position:
                    return chunk
                chain.popleft()  # wholly below the position (an overlapping guess)
                del ready[i]
                continue
            i += 1
        return None

    def collect(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to `max_records` buffered records, in fetch order, advancing positions. Takes the
        answers that arrived meanwhile first (and raises their errors)."""
        direct = self._direct
        if direct is not None and direct.pending:
            direct.pump(self._answered.append)  # what the leaders sent meanwhile
        self._take_answers()
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        wanted = max_records
        partitions = self._subs.partitions
        deserialize = self._key_deserializer is not None or self._value_deserializer is not None
        while wanted > 0:
            chunk = self._next_ready()
            if chunk is None:
                break
            state = partitions[chunk.tp]
            assert state.position is not None
            records = chunk.decode(state.position, self._config.check_crcs)
            start = chunk.index
            taken = records[start : start + wanted]
            if taken:
                if deserialize:
                    taken = self._deserialize(taken)
                out.setdefault(chunk.tp, []).extend(taken)
                chunk.index = start + len(taken)
                wanted -= len(taken)
                state.position = taken[-1].offset + 1
            if chunk.index >= len(records):
                self._chains[chunk.tp].popleft()
                self._ready.remove(chunk)
                if chunk.next_offset > state.position:
                    state.position = chunk.next_offset
        return out

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
        requests = list(self._requests)
        self._requests.clear()
        for future in requests:
            future.cancel()
        if self._direct is not None:
            self._direct.close()
        self.clear()

    def metrics(self) -> dict[str, float]:
        """The direct path's counters: fetch frames sent to leaders' direct ports and grants
        obtained (decision 0047)."""
        direct = self._direct
        if direct is None:
            return {"direct-fetch-total": 0.0, "direct-grant-total": 0.0}
        return {
            "direct-fetch-total": float(direct.sent),
            "direct-grant-total": float(direct.keeper.granted),
        }
