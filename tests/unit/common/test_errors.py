"""The error catalog must cover the proto enum exactly: a code without an entry would make the
server crash while reporting an error."""

import grpc
import pytest

from riverlog.common.errors import ERRORS, ErrorCode, RiverlogError, code_of, error_for, raise_for
from riverlog.v1 import errors_pb2


def test_python_enum_mirrors_the_proto_enum() -> None:
    proto = dict(errors_pb2.ErrorCode.items())
    assert {c.name: c.value for c in ErrorCode} == proto


def test_every_code_has_a_catalog_entry_with_a_message() -> None:
    assert set(ERRORS) == set(ErrorCode)
    for code, spec in ERRORS.items():
        assert isinstance(spec.status, grpc.StatusCode)
        if code != ErrorCode.NONE:
            assert spec.message, code


def test_kafka_numbers_are_kept() -> None:
    # A few anchors from Kafka's Errors.java: renumbering breaks every client.
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.NOT_ENOUGH_REPLICAS == 19
    assert ErrorCode.FENCED_LEADER_EPOCH == 74
    assert ErrorCode.FENCED_INSTANCE_ID == 82
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1


def test_error_for_rebuilds_the_exception_with_its_properties() -> None:
    err = error_for(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "moved to node 2")
    assert err.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert err.retriable and err.refresh_metadata
    assert err.message == "moved to node 2"
    assert err.grpc_status == grpc.StatusCode.UNAVAILABLE
    assert not error_for(int(ErrorCode.INVALID_CONFIG)).retriable


def test_unknown_wire_codes_become_unknown_server_error() -> None:
    assert code_of(31337) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_for(31337).code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_raise_for_is_silent_on_none_only() -> None:
    raise_for(0)
    with pytest.raises(RiverlogError) as info:
        raise_for(int(ErrorCode.CORRUPT_MESSAGE))
    assert "CORRUPT_MESSAGE" in str(info.value)
