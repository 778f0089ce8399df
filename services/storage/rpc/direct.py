"""A direct-port connection's grant (decision 0047): the grant frames that set it, and the
screening of every fetch and produce frame against it, in the protos' terms.

The direct port is the zero-copy server in grant mode (`ZeroCopyServer(..., grants=ledger)`):
the same framing, fetch and produce semantics, but for clients outside the cluster, so each
connection must first send a grant frame (kind 2) whose payload is a grant from a gateway's
GrantDataAccess; the answer is [u32 length][DataGrantResponse]. A later grant frame replaces
the connection's grant (renewal); a refused one leaves the previous grant in place. Then:

- a partition whose topic the grant does not name, or a frame of the other operation (fetch
  needs READ, produce WRITE), is answered TOPIC_AUTHORIZATION_FAILED: nothing read or appended;
- a follower's fetch (replica_id set) is refused the same way: a grant is a consumer's;
- a transactional produce frame is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED (transactional
  producers go through a gateway in this round);
- once the grant expired or its byte budget on this node is spent (`GrantLedger`), every
  partition is answered DELEGATION_TOKEN_EXPIRED and the client renews.

A fetch's `max_bytes` is capped at the budget left, and the record bytes it sends are charged
after; a produce frame is charged its size before it is appended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import MAX_GRANT_BYTES, Grant, GrantOperation
from riverlog.common.produce_request_parse import ParsedProduceRequest
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import encode_frame
from riverlog.v1 import data_pb2

from ..grants import GrantLedger
from ..replica.requests import FetchPartitionResult

MAX_GRANT_FRAME: Final = MAX_GRANT_BYTES


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

    def take_grant(self, payload: bytes | bytearray | memoryview) -> bytes:
        """Check a grant frame's payload; the framed DataGrantResponse to send back."""
        answer = data_pb2.DataGrantResponse()
        try:
            self.grant = self.ledger.admit(payload)
        except RiverlogError as exc:
            answer.error_code = error_code_to_proto(exc.code)
            answer.error_message = exc.message
        return encode_frame(answer.SerializeToString())

    def charge(self, size: int) -> None:
        if self.grant is not None:
            self.ledger.charge(self.grant, size)

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

    def screen_fetch(self, request: data_pb2.FetchRequest) -> list[FetchPartitionResult]:
        """Take the refused partitions out of `request` (cap its max_bytes at the budget
        left); their failed results, to put back in order with `in_order`."""
        whole = self._whole(GrantOperation.READ)
        if whole is None and request.HasField("replica_id"):
            whole = RiverlogError(
                "a grant allows consumer fetches only", ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )
        grant = self.grant
        refused: list[FetchPartitionResult] = []
        kept: list[data_pb2.FetchPartition] = []
        for p in request.partitions:
            error = whole
            if error is None and grant is not None and p.topic not in grant.topics:
                error = _denied(p.topic, GrantOperation.READ)
            if error is None:
                kept.append(p)
                continue
            result = FetchPartitionResult(TopicPartition(p.topic, p.partition))
            result.fail(error)
            refused.append(result)
        if refused:
            del request.partitions[:]
            request.partitions.extend(kept)
        if grant is not None and kept:
            left = self.ledger.remaining(grant)
            if request.max_bytes <= 0 or request.max_bytes > left:
                request.max_bytes = max(min(left, 2**31 - 1), 1)
        return refused

    def screen_produce(
        self, request: ParsedProduceRequest, frame_size: int
    ) -> list[data_pb2.ProducePartitionResponse]:
        """Take the refused partitions out of `request`; their answers. Charges the frame's
        size when anything is left to append."""
        whole = self._whole(GrantOperation.WRITE)
        if whole is None and request.transactional_id:
            whole = RiverlogError(
                "transactional produce requests go through a gateway",
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            )
        grant = self.grant
        refused: list[data_pb2.ProducePartitionResponse] = []
        kept = []
        for p in request.partitions:
            error = whole
            if error is None and grant is not None and p.topic not in grant.topics:
                error = _denied(p.topic, GrantOperation.WRITE)
            if error is None:
                kept.append(p)
                continue
            refused.append(
                data_pb2.ProducePartitionResponse(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=error_code_to_proto(error.code),
                    error_message=error.message,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    last_offset=-1,
                )
            )
        if refused:
            request.partitions = kept
        if kept:
            self.charge(frame_size)
        return refused


def in_order(
    order: Sequence[TopicPartition],
    done: Sequence[FetchPartitionResult],
    refused: Sequence[FetchPartitionResult],
) -> list[FetchPartitionResult]:
    """A fetch's results in the request's partition order."""
    by_tp = {r.tp: r for r in (*done, *refused)}
    return [by_tp[tp] for tp in order if tp in by_tp]


def with_refusals(
    answer: Awaitable[data_pb2.ProduceResponse],
    refused: list[data_pb2.ProducePartitionResponse],
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
    refused: list[data_pb2.ProducePartitionResponse],
    order: Sequence[TopicPartition],
) -> data_pb2.ProduceResponse:
    return _merge(await answer, refused, order)


def _merge(
    response: data_pb2.ProduceResponse,
    refused: list[data_pb2.ProducePartitionResponse],
    order: Sequence[TopicPartition],
) -> data_pb2.ProduceResponse:
    by_tp = {TopicPartition(p.topic, p.partition): p for p in (*response.partitions, *refused)}
    out = data_pb2.ProduceResponse(
        throttle_time_ms=response.throttle_time_ms, correlation_id=response.correlation_id
    )
    out.partitions.extend(by_tp[tp] for tp in order if tp in by_tp)
    return out


def refused_only(
    correlation_id: int, refused: list[data_pb2.ProducePartitionResponse]
) -> Awaitable[data_pb2.ProduceResponse]:
    """The answer to a produce frame whose every partition was refused (nothing appended)."""
    done: asyncio.Future[data_pb2.ProduceResponse] = asyncio.get_running_loop().create_future()
    done.set_result(data_pb2.ProduceResponse(correlation_id=correlation_id, partitions=refused))
    return done
