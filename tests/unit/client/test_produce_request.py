"""`EncodedProduceRequest`: the producer's hand-encoded ProduceRequest serializes to protobuf's
bytes for the same fields, whatever correlation id the stream gives it (decision 0015)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from riverlog.client._produce_request import EncodedProduceRequest, serialize_request
from riverlog.v1 import data_pb2

INT32 = st.integers(-(2**31), 2**31 - 1)
PARTS = st.lists(
    st.tuples(st.text(max_size=20), st.integers(0, 2**31 - 1), st.binary(max_size=300)),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    acks=st.sampled_from([0, 1, 2]),
    timeout_ms=INT32,
    tid=st.text(max_size=10),
    cid=st.integers(0, 2**63 - 1),
    parts=PARTS,
)
def test_the_bytes_of_the_message_the_fields_make(
    acks: int, timeout_ms: int, tid: str, cid: int, parts: list[tuple[str, int, bytes]]
) -> None:
    request = EncodedProduceRequest(acks, timeout_ms, tid, [(t, p, r, None) for t, p, r in parts])
    request.correlation_id = cid  # as StreamCall.submit does
    expected = data_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        transactional_id=tid,
        correlation_id=cid,
        partitions=[
            data_pb2.ProducePartition(topic=t, partition=p, records=r) for t, p, r in parts
        ],
    )
    assert serialize_request(request) == expected.SerializeToString()  # byte for byte
    assert request.message() == expected
    assert serialize_request(expected) == expected.SerializeToString()  # messages pass as well


def test_records_are_not_copied_until_serialized() -> None:
    records = b"x" * 4096
    request = EncodedProduceRequest(1, 30_000, "", [("t", 0, records, None)])
    assert any(piece is records for piece in request._pieces)
