"""Helpers shared by the tests of the hand-encoded produce request (`parse_produce_request`,
`produce_frame_pieces`): the ProduceRequest message protobuf makes of the same fields, to
compare with byte for byte, and the lane's frame joined from its pieces."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from riverlog.common.zerocopy import ProduceFramePart, produce_frame_pieces
from riverlog.v1 import data_pb2

INT32 = st.integers(-(2**31), 2**31 - 1)


def message(
    acks: int,
    timeout_ms: int,
    tid: str,
    cid: int,
    parts: Sequence[tuple[str, int, bytes, int | None]],
) -> data_pb2.ProduceRequest:
    """The message of these fields; `parts` are (topic, partition, records, leader epoch or
    None for none set)."""
    request = data_pb2.ProduceRequest(
        acks=acks,  # type: ignore[arg-type]
        timeout_ms=timeout_ms,
        transactional_id=tid,
        correlation_id=cid,
    )
    for topic, partition, records, epoch in parts:
        p = request.partitions.add(topic=topic, partition=partition, records=records)
        if epoch is not None:
            p.current_leader_epoch = epoch
    return request


def encode_produce_frame(
    acks: int,
    timeout_ms: int,
    transactional_id: str,
    correlation_id: int,
    parts: list[ProduceFramePart],
) -> bytes:
    """The produce lane's frame as one bytes: the join of `produce_frame_pieces` (the lane
    writes the pieces; the tests compare and send whole frames)."""
    return b"".join(produce_frame_pieces(acks, timeout_ms, transactional_id, correlation_id, parts))
