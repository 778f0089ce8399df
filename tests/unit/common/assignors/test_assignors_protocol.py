"""Kafka's ConsumerProtocolTest, ported, plus golden bytes and corrupt-input errors."""

from __future__ import annotations

import struct

import pytest
from assignor_testkit import sub, tp

from riverlog.common.assignors import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from riverlog.common.assignors.protocol import HIGHEST_VERSION

TP1, TP2 = tp("foo", 1), tp("bar", 2)


def _s(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def _i32(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


@pytest.mark.parametrize("version", range(HIGHEST_VERSION + 1))
def test_subscription_round_trips_each_version(version):
    subscription = Subscription(
        ["foo", "bar"], b"hello", [tp("foo", 0), tp("bar", 0)], generation_id=1, rack_id="rack-a"
    )
    parsed = decode_subscription(encode_subscription(subscription, version))
    assert set(parsed.topics) == {"foo", "bar"}
    assert parsed.user_data == b"hello"
    assert parsed.group_instance_id is None
    assert set(parsed.owned_partitions) == (
        set(subscription.owned_partitions) if version >= 1 else set()
    )
    assert parsed.generation_id == (1 if version >= 2 else -1)
    assert parsed.rack_id == ("rack-a" if version >= 3 else None)


def test_empty_user_data_stays_empty_and_null_stays_null():
    assert decode_subscription(encode_subscription(sub(["foo"], user_data=b""))).user_data == b""
    assert decode_subscription(encode_subscription(sub(["foo"]))).user_data is None
    assert decode_assignment(encode_assignment(Assignment([TP1], b""))).user_data == b""
    assert decode_assignment(encode_assignment(Assignment([TP1]))).user_data is None


def test_subscription_encoding_orders_topics_and_owned_partitions():
    a = encode_subscription(sub(["foo", "bar"], [TP1, TP2]))
    assert a == encode_subscription(sub(["bar", "foo"], [TP2, TP1]))


def test_empty_rack_reads_as_no_rack():
    data = encode_subscription(Subscription(["foo"], rack_id=""))
    assert decode_subscription(data).rack_id is None


def test_subscription_v3_bytes():
    subscription = Subscription(["foo"], b"\x01", [tp("foo", 0)], generation_id=5, rack_id="r")
    golden = (
        b"\x00\x03"  # version
        + _i32(1)
        + _s("foo")  # topics
        + _i32(1)
        + b"\x01"  # user_data
        + _i32(1)
        + _s("foo")
        + _i32(1, 0)  # owned_partitions
        + _i32(5)  # generation_id
        + _s("r")  # rack_id
    )
    assert encode_subscription(subscription) == golden
    assert decode_subscription(golden) == subscription


def test_subscription_v0_bytes_and_nulls():
    golden = b"\x00\x00" + _i32(2) + _s("bar") + _s("foo") + _i32(-1)
    assert encode_subscription(sub(["foo", "bar"]), version=0) == golden
    assert decode_subscription(golden) == sub(["bar", "foo"])


def test_assignment_bytes_group_topics_in_order_of_appearance():
    golden = b"\x00\x03" + _i32(2) + _s("bar") + _i32(1, 2) + _s("foo") + _i32(2, 1, 0) + _i32(0)
    assignment = Assignment([TP2, TP1, tp("foo", 0)], b"")
    assert encode_assignment(assignment) == golden
    assert decode_assignment(golden) == assignment


@pytest.mark.parametrize("version", range(HIGHEST_VERSION + 1))
def test_assignment_round_trips_each_version(version):
    parsed = decode_assignment(encode_assignment(Assignment([TP1, TP2], b"hello"), version))
    assert set(parsed.partitions) == {TP1, TP2}
    assert parsed.user_data == b"hello"


def test_future_subscription_version_is_read_as_the_newest_known():
    data = (
        b"\x00\x64"  # version 100
        + _i32(1)
        + _s("topic")
        + _i32(0)
        + _i32(1)
        + _s("bar")
        + _i32(1, 2)
        + _i32(1)
        + _s("rack-a")
        + _s("bar")  # a field version 100 added
    )
    parsed = decode_subscription(data)
    assert (parsed.topics, parsed.owned_partitions) == (["topic"], [TP2])
    assert (parsed.user_data, parsed.generation_id, parsed.rack_id) == (b"", 1, "rack-a")


def test_future_assignment_version_is_read_as_the_newest_known():
    data = b"\x00\x64" + _i32(1) + _s("foo") + _i32(1, 1) + _i32(0) + _s("bar")
    assert decode_assignment(data) == Assignment([TP1], b"")


def test_versions_above_the_newest_are_written_as_the_newest():
    subscription = Subscription(["foo"], None, [TP1], 3, "r")
    assert encode_subscription(subscription, 9) == encode_subscription(subscription, 3)
    with pytest.raises(ValueError, match="unsupported"):
        encode_subscription(subscription, -1)


def test_too_long_topic_is_refused():
    with pytest.raises(ValueError, match="32767"):
        encode_subscription(sub(["x" * 40000]))


GOOD = encode_subscription(Subscription(["foo", "bar"], b"ud", [TP1, TP2], 4, "rack"))


@pytest.mark.parametrize("cut", range(len(GOOD)))
def test_every_truncation_is_reported(cut):
    with pytest.raises(ConsumerProtocolError, match=r"corrupt subscription|version"):
        decode_subscription(GOOD[:cut])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xff" + _i32(0, -1), "unsupported subscription version -1"),
        (b"\x00\x01" + _i32(-1), "topics has -1 elements"),
        (b"\x00\x01" + _i32(1) + b"\xff\xff", "topics has length -1"),
        (b"\x00\x01" + _i32(1) + b"\x00\x02\xc3\x28", "topics is not UTF-8"),
        (b"\x00\x01" + _i32(0) + _i32(-2), "user_data has length -2"),
        (b"\x00\x01" + _i32(100_000), "claims 100000 elements"),
        (b"\x00\x01" + _i32(0, -1) + _i32(1) + _s("t") + _i32(-5), "partitions has -5"),
        (b"\x00\x03" + _i32(0, -1, 0, 7) + b"\xff\xfe", "rack_id has length -2"),
    ],
)
def test_corrupt_subscriptions_are_reported(data, message):
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_subscription(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "version needs 2 bytes"),
        (b"\x80\x00" + _i32(0, -1), "unsupported assignment version"),
        (b"\x00\x00" + _i32(1) + _s("foo") + _i32(2, 0), "partitions claims 2 elements"),
        (b"\x00\x00" + _i32(1) + b"\x00\x09foo---", "topic needs 9 bytes, only 6 left"),
        (b"\x00\x00" + _i32(0) + _i32(5) + b"ab", "user_data needs 5 bytes"),
    ],
)
def test_corrupt_assignments_are_reported(data, message):
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_assignment(data)
