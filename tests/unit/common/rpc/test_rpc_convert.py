"""The shared vocabulary against the wire enums: acks are numbered differently on the wire
(ACKS_LEADER=0, ACKS_NONE=1, ACKS_ALL=2) than in Kafka and in `riverlog.common.types.Acks`
(1, 0, -1); isolation levels and offset specs keep their numbers; a wire value the enum does
not define converts to None (refused by the domain: INVALID_REQUIRED_ACKS for acks)."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.convert import (
    acks_from_proto,
    acks_to_proto,
    error_code_to_proto,
    isolation_level_from_proto,
    isolation_level_to_proto,
    offset_spec_from_proto,
    offset_spec_to_proto,
)
from riverlog.common.types import Acks, IsolationLevel, OffsetSpec
from riverlog.v1 import common_pb2, errors_pb2


def test_acks_map_to_the_wire_numbering() -> None:
    assert acks_to_proto(Acks.LEADER) == common_pb2.ACKS_LEADER == 0
    assert acks_to_proto(Acks.NONE) == common_pb2.ACKS_NONE == 1
    assert acks_to_proto(Acks.ALL) == common_pb2.ACKS_ALL == 2
    assert (Acks.NONE, Acks.LEADER, Acks.ALL) == (0, 1, -1)  # Kafka's
    for acks in Acks:
        assert acks_from_proto(acks_to_proto(acks)) is acks


@pytest.mark.parametrize("wire", [-1, 3, 5, 7, 9])
def test_acks_the_wire_does_not_define_are_none(wire: int) -> None:
    assert acks_from_proto(wire) is None


def test_isolation_levels_and_offset_specs_keep_their_numbers() -> None:
    for level in IsolationLevel:
        assert isolation_level_to_proto(level) == int(level)
        assert isolation_level_from_proto(int(level)) is level
    assert isolation_level_to_proto(IsolationLevel.READ_COMMITTED) == common_pb2.READ_COMMITTED
    assert isolation_level_from_proto(9) is None
    assert offset_spec_to_proto(OffsetSpec.EARLIEST) == common_pb2.OFFSET_SPEC_EARLIEST
    assert offset_spec_to_proto(OffsetSpec.MAX_TIMESTAMP) == common_pb2.OFFSET_SPEC_MAX_TIMESTAMP
    for spec in OffsetSpec:
        assert offset_spec_from_proto(offset_spec_to_proto(spec)) is spec
    assert offset_spec_to_proto(OffsetSpec.EARLIEST_LOCAL) == common_pb2.OFFSET_SPEC_EARLIEST_LOCAL
    assert offset_spec_from_proto(5) is None


def test_error_codes_keep_their_numbers() -> None:
    assert error_code_to_proto(ErrorCode.NOT_COORDINATOR) == errors_pb2.NOT_COORDINATOR
