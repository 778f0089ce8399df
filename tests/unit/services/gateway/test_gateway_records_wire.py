"""FetchRecords' records encoded in C straight from the batch bytes (`records_wire`, the
gateway's `_encode_wire`) against the Python path (`_decode` then one protobuf message per
record): the same Record messages, the same next offset and the same errors, on random batches
(keys and values null, empty or not, headers, log append time, every codec, control batches,
holes between batches), cut at any offset, capped at any count, torn or damaged."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverlog.common.records import BatchBuilder, record_loop
from riverlog.services.gateway.records import _decode, _encode_wire
from riverlog.services.gateway.rpc.convert import record_to_proto
from riverlog.v1 import gateway_pb2

pytestmark = pytest.mark.skipif(not record_loop.compiled(), reason="the C extension is not built")

# The random batches of the record-loop tests (keys and values null, empty or not, headers, log
# append time, every codec, control batches, holes between batches).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common" / "records"))
import test_records_rows as kit  # noqa: E402

TS = kit.TS
batches = kit.batches
build = kit.build


def both(data: bytes, offset: int, max_records: int) -> tuple[Any, Any]:
    wire, next_wire, error_wire = _encode_wire(data, offset, max_records)
    decoded, next_py, error_py = _decode(data, offset, max_records)
    got = gateway_pb2.FetchRecordsResponse.FromString(bytes(wire)).records
    want = gateway_pb2.FetchRecordsResponse(records=[record_to_proto(r) for r in decoded]).records
    return (list(got), next_wire, error_wire and error_wire.code), (
        list(want),
        next_py,
        error_py and error_py.code,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=batches,
    cut=st.integers(0, 120),
    cap=st.integers(0, 50),
    torn=st.integers(0, 30),
)
def test_the_c_encoding_answers_as_the_python_path(
    spec: list[Any], cut: int, cap: int, torn: int
) -> None:
    data = build(spec)
    data = data[: len(data) - torn]
    got, want = both(data, cut, cap)
    assert got == want


@settings(max_examples=80, deadline=None)
@given(spec=batches, flip=st.integers(0, 10_000))
def test_a_damaged_batch_gets_the_same_records_and_error(spec: list[Any], flip: int) -> None:
    data = bytearray(build(spec))
    data[flip % len(data)] ^= 0x5A
    got, want = both(bytes(data), 0, 0)
    assert got == want


def test_null_empty_and_set_fields_round_trip() -> None:
    builder = BatchBuilder()
    builder.append(TS, None, None)
    builder.append(TS + 1, b"", b"")
    builder.append(TS - 5, b"k", b"v", [("h", None), ("", b""), ("x", b"y")])
    wire, next_offset, error = _encode_wire(builder.build(), 0, 0)
    got = gateway_pb2.FetchRecordsResponse.FromString(bytes(wire)).records
    assert error is None and next_offset == 3
    assert [(r.has_key, r.key, r.has_value, r.value, r.offset) for r in got] == [
        (False, b"", False, b"", 0),
        (True, b"", True, b"", 1),
        (True, b"k", True, b"v", 2),
    ]
    assert [(h.key, h.value) for h in got[2].headers] == [("h", b""), ("", b""), ("x", b"y")]
    assert [r.timestamp_ms for r in got] == [TS, TS + 1, TS - 5]
