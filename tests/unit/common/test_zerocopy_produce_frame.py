"""`produce_frame_pieces`: the produce lane's frame encoded from the parts by hand is the frame
of the ProduceRequest message those fields make (decision 0015's addendum)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from produce_request_testkit import INT32, encode_produce_frame, message

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.zerocopy import (
    FRAME_HEADER,
    KIND_PRODUCE,
    MAX_REQUEST_FRAME,
    encode_frame,
    produce_frame_pieces,
    split_request_header,
)
from riverlog.v1 import data_pb2

PARTS = st.lists(
    st.tuples(
        st.text(max_size=20),
        st.integers(0, 2**31 - 1),
        st.binary(max_size=300),
        st.none() | INT32,
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    acks=st.sampled_from([0, 1, 2]),
    timeout_ms=INT32,
    tid=st.text(max_size=10),
    cid=st.integers(0, 2**63 - 1),
    parts=PARTS,
)
def test_the_frame_of_the_message_the_fields_make(
    acks: int, timeout_ms: int, tid: str, cid: int, parts: list
) -> None:
    frame = encode_produce_frame(acks, timeout_ms, tid, cid, parts)
    kind, size = split_request_header(FRAME_HEADER.unpack_from(frame)[0])
    assert (kind, size) == (KIND_PRODUCE, len(frame) - FRAME_HEADER.size)
    expected = message(acks, timeout_ms, tid, cid, parts)
    assert data_pb2.ProduceRequest.FromString(frame[FRAME_HEADER.size :]) == expected
    assert frame == encode_frame(expected.SerializeToString(), KIND_PRODUCE)  # byte for byte


def test_a_frame_over_the_limit_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(RiverlogError) as refused:
        encode_produce_frame(0, 0, "", 1, [("t", 0, b"x" * MAX_REQUEST_FRAME, None)])
    assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE


@settings(max_examples=100, deadline=None)
@given(
    cid=st.integers(0, 2**63 - 1),
    runs=st.lists(st.lists(st.binary(max_size=200), max_size=4), min_size=1, max_size=3),
)
def test_records_given_as_a_list_of_batches_are_their_concatenation(
    cid: int, runs: list[list[bytes]]
) -> None:
    """The SDK's sender gives a partition's several batches as a list (no join before the
    request's own): the same frame as their concatenation, and the same pieces on the lane."""
    listed = [(f"t{i}", i, run, None) for i, run in enumerate(runs)]
    joined = [(f"t{i}", i, b"".join(run), None) for i, run in enumerate(runs)]
    frame = encode_produce_frame(1, 30_000, "", cid, listed)
    assert frame == encode_produce_frame(1, 30_000, "", cid, joined)
    assert b"".join(produce_frame_pieces(1, 30_000, "", cid, listed)) == frame
