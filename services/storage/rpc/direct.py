"""A direct-port connection's grant (decision 0047): the grant frames that set it, and the
screening of every fetch and produce frame against it, in the protos' terms.

The direct port is the zero-copy server in grant mode (`ZeroCopyServer(..., grants=ledger)`):
the same framing, fetch and produce semantics, but for clients outside the cluster, so each
connection must first send a grant frame (kind 2) whose payload is a grant from a gateway's
GrantDataAccess; the answer is [u32 length][DataGrantResponse]. A later grant frame replaces
the connection's grant (renewal); a refused one leaves the previous grant in place. A grant
frame is answered only once every frame before it is answered, and before any frame after it
is read: a client that pipelines produce frames knows the grant's answer as the first one
after the answers it still awaited when it sent the grant (the framing carries no kind, and an
empty DataGrantResponse could not be told from a ProduceResponse by its bytes). Then:

- a partition whose topic the grant does not name, or a frame of the other operation (fetch
  needs READ, produce WRITE), is answered TOPIC_AUTHORIZATION_FAILED: nothing read or appended;
- a follower's fetch (replica_id set) is answered CLUSTER_AUTHORIZATION_FAILED, as Kafka
  answers a follower fetch without the cluster permission: a grant is a consumer's;
- a transactional produce frame is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED (transactional
  producers go through a gateway in this round);
- once the grant expired or its byte budget on this node is spent, or the budget left does not
  pay for the frame (`GrantLedger`), every partition is answered DELEGATION_TOKEN_EXPIRED and
  the client renews.

Every frame taken pays before anything is read or appended (`GrantLedger`): its length plus
FRAME_CHARGE_BYTES; a fetch also reserves `min(max_bytes, budget left)` (its `max_bytes` is set
to that) and is settled to the record bytes it read before they are sent (`settle_fetch`). A
negative `max_bytes` is left as it is: the fetch answers INVALID_REQUEST, as on the internal
port. A fetch's long poll is capped at MAX_DIRECT_WAIT_MS and at the grant's expiry, and a
produce frame's timeout_ms likewise: nothing parked outlives its grant, and a client that
half-closes its socket after a fetch holds the parked fetch (and the socket, in CLOSE_WAIT) for
at most that long.

Refused partitions are answered in their place in the request (by position: a frame may name a
partition twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Final, TypeVar

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import MAX_GRANT_BYTES, Grant, GrantOperation
from riverlog.common.produce_request_parse import ParsedProduceRequest
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import encode_frame
from riverlog.v1 import data_pb2

from ..grants import GrantLedger
from ..replica.requests import FetchPartitionResult

_T = TypeVar("_T")

MAX_GRANT_FRAME: Final = MAX_GRANT_BYTES
MAX_DIRECT_WAIT_MS: Final = 30_000
"""The longest fetch long poll or produce timeout_ms a direct frame gets (the gateway's default
request.timeout.ms, its own cap on a client's max_wait_ms); the grant's expiry caps it too."""
_INT32_MAX: Final = 2**31 - 1

Refusals = list[tuple[int, FetchPartitionResult]]
"""Refused partitions of a fetch frame, by their position in it."""
ProduceRefusals = list[tuple[int, data_pb2.ProducePartitionResponse]]
"""Refused partitions of a produce frame, by their position in it."""


def _denied(topic: str, operation: GrantOperation) -> RiverlogError:
    return RiverlogError(
        f"the connection's grant does not cover {operation.name} on topic {topic!r}",
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )


class DirectSession:
    """One direct-port connection's grant. Event loop only."""

    def __init__(self, ledger: GrantLedger) -> None:
        self.ledger = ledger
        self.grant: Grant | None = None
        self._reserved: tuple[Grant, int] | None = None  # the screened fetch's (one at a time)

    def take_grant(self, payload: bytes | bytearray | memoryview) -> bytes:
        """Check a grant frame's payload; the framed DataGrantResponse to send back."""
        answer = data_pb2.DataGrantResponse()
        try:
            self.grant = self.ledger.admit(payload)
        except RiverlogError as exc:
            answer.error_code = error_code_to_proto(exc.code)
            answer.error_message = exc.message
        return encode_frame(answer.SerializeToString())

    def _whole(self, operation: GrantOperation) -> RiverlogError | None:
        """Why the whole frame is refused (no grant, other operation, expired or spent)."""
        grant = self.grant
        if grant is None:  # the server closes such a connection before; kept for safety
            return RiverlogError(
                "no grant on this connection", ErrorCode.SASL_AUTHENTICATION_FAILED
            )
        if grant.operation != operation:
            return RiverlogError(
                f"the connection's grant is for {grant.operation.name}, not {operation.name}",
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            )
        return self.ledger.refusal(grant)

    def _wait_cap(self, grant: Grant, wait_ms: int) -> int:
        """`wait_ms` (<= 0: the longest) capped at MAX_DIRECT_WAIT_MS and the grant's expiry."""
        until_expiry = grant.expires_at_ms - self.ledger.clock.time_ms()
        if wait_ms <= 0:
            wait_ms = MAX_DIRECT_WAIT_MS
        return max(min(wait_ms, MAX_DIRECT_WAIT_MS, until_expiry), 1)

    def screen_fetch(self, request: data_pb2.FetchRequest, frame_size: int) -> Refusals:
        """Take the refused partitions out of `request` and charge the rest's frame; their
        failed results by position, to put back in order with `in_order`. Reserves the record
        bytes the fetch may read (its max_bytes is set to them) until `settle_fetch`."""
        self._reserved = None
        whole = self._whole(GrantOperation.READ)
        if whole is None and request.HasField("replica_id"):
            whole = RiverlogError(
                "a grant allows consumer fetches only", ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            )
        grant = self.grant
        refused: Refusals = []
        kept: list[tuple[int, data_pb2.FetchPartition]] = []
        for i, p in enumerate(request.partitions):
            error = whole
            if error is None and grant is not None and p.topic not in grant.topics:
                error = _denied(p.topic, GrantOperation.READ)
            if error is None:
                kept.append((i, p))
            else:
                refused.append((i, _failed(p, error)))
        if grant is not None and kept:
            want = request.max_bytes if request.max_bytes != 0 else _INT32_MAX
            reserved = self.ledger.reserve_fetch(grant, frame_size, max(want, 0))
            if isinstance(reserved, RiverlogError):
                refused.extend((i, _failed(p, reserved)) for i, p in kept)
                refused.sort(key=lambda r: r[0])
                kept = []
            else:
                self._reserved = (grant, reserved)
                if request.max_bytes >= 0:  # negative: the fetch answers INVALID_REQUEST
                    request.max_bytes = max(reserved, 1)
                if request.max_wait_ms > 0:
                    request.max_wait_ms = self._wait_cap(grant, request.max_wait_ms)
        if refused:
            partitions = [p for _, p in kept]
            del request.partitions[:]
            request.partitions.extend(partitions)
        return refused

    def settle_fetch(self, results: Sequence[FetchPartitionResult]) -> None:
        """Charge the screened fetch the record bytes it read (before they are sent) instead of
        what it reserved."""
        if self._reserved is not None:
            grant, reserved = self._reserved
            self._reserved = None
            self.ledger.settle_fetch(grant, reserved, sum(r.size for r in results))

    def screen_produce(self, request: ParsedProduceRequest, frame_size: int) -> ProduceRefusals:
        """Take the refused partitions out of `request`; their answers by position. Charges
        the frame when anything is left to append (or refuses it all when the budget left does
        not pay for it), and caps its timeout_ms."""
        whole = self._whole(GrantOperation.WRITE)
        if whole is None and request.transactional_id:
            whole = RiverlogError(
                "transactional produce requests go through a gateway",
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            )
        grant = self.grant
        refused: ProduceRefusals = []
        kept = []
        for i, p in enumerate(request.partitions):
            error = whole
            if error is None and grant is not None and p.topic not in grant.topics:
                error = _denied(p.topic, GrantOperation.WRITE)
            if error is None:
                kept.append((i, p))
            else:
                refused.append((i, _produce_failed(p.topic, p.partition, error)))
        if grant is not None and kept:
            spent = self.ledger.take_produce(grant, frame_size)
            if spent is not None:
                refused.extend((i, _produce_failed(p.topic, p.partition, spent)) for i, p in kept)
                refused.sort(key=lambda r: r[0])
                kept = []
            else:
                request.timeout_ms = self._wait_cap(grant, request.timeout_ms)
        if refused:
            request.partitions = [p for _, p in kept]
        return refused


def _failed(p: data_pb2.FetchPartition, error: RiverlogError) -> FetchPartitionResult:
    result = FetchPartitionResult(TopicPartition(p.topic, p.partition))
    result.fail(error)
    return result


def _produce_failed(
    topic: str, partition: int, error: RiverlogError
) -> data_pb2.ProducePartitionResponse:
    return data_pb2.ProducePartitionResponse(
        topic=topic,
        partition=partition,
        error_code=error_code_to_proto(error.code),
        error_message=error.message,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        last_offset=-1,
    )


def _by_position(count: int, done: Sequence[_T], refused: Sequence[tuple[int, _T]]) -> list[_T]:
    """`count` answers: the refused ones at their positions, the others (`done`, in request
    order) in the places left."""
    out: list[_T] = []
    pending = iter(done)
    refusals = iter(refused)
    nxt = next(refusals, None)
    for i in range(count):
        if nxt is not None and nxt[0] == i:
            out.append(nxt[1])
            nxt = next(refusals, None)
        else:
            answer = next(pending, None)
            if answer is None:
                break  # fewer answers than asked (not expected): what there is
            out.append(answer)
    return out


def in_order(
    order: Sequence[TopicPartition],
    done: Sequence[FetchPartitionResult],
    refused: Refusals,
) -> list[FetchPartitionResult]:
    """A fetch's results in the request's partition order (`order`: its partitions)."""
    return _by_position(len(order), done, refused)


def with_refusals(
    answer: Awaitable[data_pb2.ProduceResponse],
    refused: ProduceRefusals,
    order: Sequence[TopicPartition],
) -> Awaitable[data_pb2.ProduceResponse]:
    """`answer` with the refused partitions' answers merged in request order; a future that is
    already done stays one (the server's inline acks=1 path)."""
    if not refused:
        return answer
    if isinstance(answer, asyncio.Future) and answer.done() and not answer.cancelled():
        if answer.exception() is None:
            merged: asyncio.Future[data_pb2.ProduceResponse] = (
                asyncio.get_running_loop().create_future()
            )
            merged.set_result(_merge(answer.result(), refused, order))
            return merged
    return _merged_later(answer, refused, order)


async def _merged_later(
    answer: Awaitable[data_pb2.ProduceResponse],
    refused: ProduceRefusals,
    order: Sequence[TopicPartition],
) -> data_pb2.ProduceResponse:
    return _merge(await answer, refused, order)


def _merge(
    response: data_pb2.ProduceResponse,
    refused: ProduceRefusals,
    order: Sequence[TopicPartition],
) -> data_pb2.ProduceResponse:
    out = data_pb2.ProduceResponse(
        throttle_time_ms=response.throttle_time_ms, correlation_id=response.correlation_id
    )
    out.partitions.extend(_by_position(len(order), response.partitions, refused))
    return out


def refused_only(
    correlation_id: int, refused: ProduceRefusals
) -> Awaitable[data_pb2.ProduceResponse]:
    """The answer to a produce frame whose every partition was refused (nothing appended)."""
    done: asyncio.Future[data_pb2.ProduceResponse] = asyncio.get_running_loop().create_future()
    partitions = [p for _, p in refused]
    done.set_result(data_pb2.ProduceResponse(correlation_id=correlation_id, partitions=partitions))
    return done
