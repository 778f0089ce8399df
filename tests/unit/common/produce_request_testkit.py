"""Helpers shared by the tests of the hand-encoded produce request (`parse_produce_request`,
`encode_produce_frame`): the ProduceRequest message protobuf makes of the same fields, to
compare with byte for byte."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

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
