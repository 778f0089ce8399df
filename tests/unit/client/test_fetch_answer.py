"""The consumer's FetchStream deserializer (`_fetch_answer`): every field reads as protobuf's
parse of the same bytes, each partition's records as a range of the received bytes (no copy),
and malformed answers are refused as protobuf refuses them."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from riverlog.client._fetch_answer import FetchAnswer, parse_fetch_response, records_of
from riverlog.v1 import data_pb2, errors_pb2

partitions = st.builds(
    data_pb2.FetchPartitionResponse,
    topic=st.text(max_size=8),
    partition=st.integers(0, 1 << 20),
    error_code=st.sampled_from(
        [errors_pb2.NONE, errors_pb2.NOT_LEADER_OR_FOLLOWER, errors_pb2.UNKNOWN_SERVER_ERROR]
    ),
    error_message=st.text(max_size=8),
    high_watermark=st.integers(-1, 1 << 40),
    last_stable_offset=st.integers(-1, 1 << 40),
    records=st.binary(max_size=300),
    aborted_transactions=st.lists(
        st.builds(
            data_pb2.AbortedTransaction,
            producer_id=st.integers(0, 1 << 40),
            first_offset=st.integers(0, 1 << 40),
        ),
        max_size=3,
    ),
    fetch_offset=st.integers(0, 1 << 40),
    push_credit=st.integers(0, 1000),
    push_offset=st.integers(-1, 1 << 40),
)
responses = st.builds(
    data_pb2.FetchResponse,
    partitions=st.lists(partitions, max_size=4),
    throttle_time_ms=st.integers(0, 10_000),
    correlation_id=st.integers(0, 1 << 40),
    pushed=st.booleans(),
)


def as_received(answer: FetchAnswer) -> data_pb2.FetchResponse:
    """The answer as one protobuf message again (records put back)."""
    message = data_pb2.FetchResponse()
    message.CopyFrom(answer.message)
    for i, partition in enumerate(message.partitions):
        data, start, end = answer.records(i)
        partition.records = data[start:end]
    return message


@settings(max_examples=50, deadline=None)
@given(response=responses)
def test_reads_as_protobuf_does(response: data_pb2.FetchResponse) -> None:
    wire = response.SerializeToString()
    answer = parse_fetch_response(wire)
    assert as_received(answer) == response
    assert answer.correlation_id == response.correlation_id
    assert answer.pushed == response.pushed
    assert answer.throttle_time_ms == response.throttle_time_ms
    for i, partition in enumerate(answer.partitions):
        data, _, _ = records_of(answer, i)
        assert data is wire  # a range of the received bytes, not a copy
        assert partition.records == b""
        assert records_of(response, i) == (
            response.partitions[i].records,
            0,
            len(response.partitions[i].records),
        )


def test_records_in_any_field_order_and_the_last_one_wins() -> None:
    """protobuf reads fields in any order (the gateway appends the records after the rest of
    the partition, decision 0016), and of a repeated scalar field the last value counts."""
    head = data_pb2.FetchPartitionResponse(topic="t", partition=2, high_watermark=9)
    partition = (
        b"\x42\x03old" + head.SerializeToString() + b"\x42\x05batch"
    )  # records (8) before and after the rest
    wire = b"\x0a" + bytes([len(partition)]) + partition + b"\x18\x07"  # correlation_id 7
    answer = parse_fetch_response(wire)
    assert answer.correlation_id == 7
    assert answer.partitions[0].topic == "t" and answer.partitions[0].high_watermark == 9
    data, start, end = answer.records(0)
    assert data[start:end] == b"batch"
    assert data_pb2.FetchResponse.FromString(wire).partitions[0].records == b"batch"


@pytest.mark.parametrize(
    "wire",
    [
        b"\x0a\x05\x42\x09abc",  # records longer than their partition
        b"\x0a\x09\x42\x02ab",  # partition longer than the answer
        b"\x18\xff",  # truncated varint
        b"\x18" + b"\xff" * 10 + b"\x01",  # varint over 64 bits
        b"\x0b",  # wire type 3 (group start): not in this message
    ],
)
def test_malformed_answers_are_refused(wire: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_fetch_response(wire)


def test_an_empty_answer() -> None:
    answer = parse_fetch_response(b"")
    assert list(answer.partitions) == [] and answer.correlation_id == 0 and not answer.pushed
