"""`parse_produce_request`: a ProduceRequest read by hand, its records left as views into the
bytes read, gives protobuf's fields for protobuf's bytes; bytes that are no request raise
ValueError with the reason (decision 0015's addendum)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from produce_request_testkit import INT32, message

from riverlog.common.produce_request_parse import parse_produce_request

PARTS = st.lists(
    st.tuples(
        st.text(max_size=20),
        INT32,
        st.binary(max_size=300),
        st.none() | INT32,
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    acks=st.sampled_from([-1, 0, 1, 2, 7]),
    timeout_ms=INT32,
    tid=st.text(max_size=10),
    cid=st.integers(-(2**63), 2**63 - 1),
    parts=PARTS,
)
def test_the_fields_protobuf_reads(
    acks: int, timeout_ms: int, tid: str, cid: int, parts: list[tuple[str, int, bytes, int | None]]
) -> None:
    data = message(acks, timeout_ms, tid, cid, parts).SerializeToString()
    got = parse_produce_request(data)
    assert (got.acks, got.timeout_ms, got.transactional_id, got.correlation_id) == (
        acks,
        timeout_ms,
        tid,
        cid,
    )
    assert [
        (p.topic, p.partition, bytes(p.records), p.current_leader_epoch) for p in got.partitions
    ] == [tuple(part) for part in parts]


def test_records_are_views_into_the_bytes_read() -> None:
    data = message(1, 100, "", 3, [("t", 0, b"r" * 1000, None)]).SerializeToString()
    (part,) = parse_produce_request(data).partitions
    assert isinstance(part.records, memoryview)
    assert part.records.obj is data  # no copy


def test_unknown_fields_are_skipped_and_the_last_scalar_wins() -> None:
    known = message(1, 5, "x", 9, [("t", 2, b"abc", 4)]).SerializeToString()
    unknown = (
        b"\x30\x96\x01"  # field 6, varint
        b"\x39"
        + b"\x00" * 8  # field 7, fixed64
        + b"\x42\x02hi"  # field 8, bytes
        + b"\x4d"
        + b"\x00" * 4  # field 9, fixed32
    )
    got = parse_produce_request(known + unknown + b"\x10\x07")  # timeout_ms again: 7
    assert got.timeout_ms == 7
    assert (got.acks, got.correlation_id, got.transactional_id) == (1, 9, "x")
    assert bytes(got.partitions[0].records) == b"abc"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x08", "truncated or overlong varint"),
        (b"\x08" + b"\xff" * 10 + b"\x01", "truncated or overlong varint"),
        (b"\x1a\x05\x0a\x01", "past the end"),
        (b"\x1a\x04\x1a\x09abc", "past the end"),  # records longer than their partition
        (b"\x22\x02\xff\xfe", "not valid UTF-8"),
        (b"\x0b", "unsupported wire type"),  # a group
        (b"\x00\x00", "field number 0"),
        (b"\x0a\x01x", "field 1 has wire type 2"),  # acks as bytes
        (b"\x39\x00", "truncated fixed-size value"),
    ],
)
def test_bytes_that_are_no_request_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_produce_request(data)
