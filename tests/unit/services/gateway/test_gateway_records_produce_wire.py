"""ProduceRecords from the request's bytes in C (`PlainRecords.produce_encoded`, decision 0045)
against the Python path (`produce` on Records converted from the protobuf message): the same
batches sent to the same partitions and the same ProduceRecordsResponse, byte for byte, on
random requests (keys and values null, empty or not, headers, timestamps 0 / set / negative,
an explicit partition or none, every codec, partitions failing, acks=0) and on a request that
spans BATCH_SIZE; bad bytes are a clear error (ValueError from the parse, INVALID_REQUEST from
`produce_encoded`) and never crash the process, on hand-made and on randomly damaged requests."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any

import grpc
import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import produce_wire, record_loop
from riverlog.common.rpc.channel import MAX_MESSAGE_BYTES, aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.types import Acks
from riverlog.services.gateway import records as records_module
from riverlog.services.gateway.admin import Admin
from riverlog.services.gateway.produce import ProduceOptions, ProducePartResult
from riverlog.services.gateway.records import EncodedProduceRecords, PlainRecords
from riverlog.services.gateway.rpc import convert
from riverlog.services.gateway.rpc.servicer import (
    SERVICE_NAME,
    Families,
    GatewayServicer,
    add_to_server,
)
from riverlog.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.skipif(not produce_wire.compiled(), reason="the C extension is not built")

CODECS = ("", "gzip", "lz4", "zstd", "snappy")
DEFAULTS = ProduceOptions()


def fresh() -> tuple[Harness, PlainRecords]:
    clock = ManualClock()
    harness = Harness(make_image(1, {"t": [1, 2, 1]}), FAST, clock)
    return harness, PlainRecords(harness.cache, harness.producer, harness.fetcher, clock)


def sent(harness: Harness) -> list[tuple[int, list[tuple[int, bytes]]]]:
    return [
        (node, [(item.tp.partition, bytes(item.records)) for item in items])  # type: ignore[attr-defined]
        for method, node, items, _ in harness.storage.calls
        if method == "produce"
    ]


async def both(
    request: gateway_pb2.ProduceRecordsRequest,
    options: ProduceOptions = DEFAULTS,
    answer: Any = None,
) -> tuple[Any, Any]:
    """(batches sent, response bytes) of the Python path and of the C path."""
    outcomes = []
    for path in ("python", "c"):
        harness, plain = fresh()
        if answer is not None:
            harness.storage.answer = answer
        if path == "python":
            partition = request.partition if request.HasField("partition") else None
            records = [convert.record_from_proto(r) for r in request.records]
            results = await plain.produce(
                harness.ctx(), request.topic, partition, records, options, request.compression_type
            )
            response = convert.produce_records_to_proto(results)
        else:
            encoded = EncodedProduceRecords.parse(request.SerializeToString())
            produced = await plain.produce_encoded(harness.ctx(), encoded, options)
            response = convert.produced_records_to_proto(produced)
            ok = sum(1 for r in response.results if r.error_code == 0)
            assert produced.ok == ok
        outcomes.append((sent(harness), response.SerializeToString()))
    return outcomes[0], outcomes[1]


def blob(rng: random.Random) -> bytes:
    return rng.randbytes(rng.choice((0, 1, 3, 4, 7, 40, 200)))


def random_record(rng: random.Random) -> common_pb2.Record:
    msg = common_pb2.Record()
    if rng.random() < 0.6:
        msg.key = blob(rng)
        msg.has_key = rng.random() < 0.8
    if rng.random() < 0.9:
        msg.value = blob(rng)
        msg.has_value = rng.random() < 0.8
    for _ in range(rng.choice((0, 0, 0, 1, 3))):
        key = rng.choice(("", "h", "clé-ü", "x" * 130))
        msg.headers.append(common_pb2.Header(key=key, value=blob(rng)))
    msg.timestamp_ms = rng.choice(
        (0, 0, 0, 1, 1_700_000_000_123, 1_700_000_009_999, (1 << 62), -1, -5)
    )
    if rng.random() < 0.1:  # fields a produce ignores
        msg.offset = rng.randrange(1 << 40)
        msg.timestamp_type = 1
    return msg


def random_request(rng: random.Random) -> gateway_pb2.ProduceRecordsRequest:
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t",
        records=[random_record(rng) for _ in range(rng.choice((1, 2, 5, 30, 300)))],
        compression_type=rng.choice(CODECS),
        timeout_ms=rng.choice((0, 5000)),
    )
    if rng.random() < 0.3:
        request.partition = rng.randrange(3)
    return request


@pytest.mark.parametrize("seed", range(40))
async def test_random_requests_match_the_python_path(seed: int) -> None:
    rng = random.Random(seed)
    request = random_request(rng)
    python, c = await both(request)
    assert c == python


async def test_keyed_keyless_null_and_bad_timestamps() -> None:
    records = [
        common_pb2.Record(key=b"k1", value=b"v1"),
        common_pb2.Record(value=b"keyless", has_value=True),
        common_pb2.Record(key=b"", has_key=True, has_value=False),  # empty key, null value
        common_pb2.Record(key=b"k2", value=b"", has_value=True, timestamp_ms=-3),
        common_pb2.Record(
            key=b"k3",
            value=b"h",
            headers=[common_pb2.Header(key="a", value=b""), common_pb2.Header(key="b", value=b"x")],
            timestamp_ms=1_700_000_000_000,
        ),
        common_pb2.Record(has_value=True, timestamp_ms=-1),
    ]
    request = gateway_pb2.ProduceRecordsRequest(topic="t", records=records)
    python, c = await both(request)
    assert c == python
    response = gateway_pb2.ProduceRecordsResponse.FromString(c[1])
    codes = [r.error_code for r in response.results]
    assert codes[3] == codes[5] == ErrorCode.INVALID_TIMESTAMP
    assert response.results[3].error_message == "record 3 has a negative timestamp (-3)"
    assert (response.results[5].partition, response.results[5].offset) == (-1, -1)


async def test_explicit_partition_and_every_record_bad() -> None:
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t", partition=2, records=[common_pb2.Record(key=b"k", value=b"v")] * 3
    )
    python, c = await both(request)
    assert c == python
    assert {p for _, items in c[0] for p, _ in items} == {2}
    bad = gateway_pb2.ProduceRecordsRequest(
        topic="t", records=[common_pb2.Record(value=b"v", timestamp_ms=-2)] * 2
    )
    python, c = await both(bad)
    assert c == python


async def test_failed_partitions_and_acks_zero() -> None:
    def answer(node: int, item: Any) -> ProducePartResult | None:
        if item.tp.partition == 1:
            return ProducePartResult(item.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
        return None

    request = random_request(random.Random(7))
    request.ClearField("partition")
    python, c = await both(request, answer=answer)
    assert c == python
    python, c = await both(request, ProduceOptions(acks=Acks.NONE))
    assert c == python


@pytest.mark.parametrize("codec", ["", "lz4"])
async def test_a_request_past_batch_size_is_split_alike(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(3)
    records = [
        common_pb2.Record(
            key=b"k" if i % 3 else b"",
            has_key=bool(i % 3),
            value=rng.randbytes(rng.choice((10, 900, 3000))),
            timestamp_ms=rng.choice((0, 1_700_000_000_000 + i)),
            headers=[common_pb2.Header(key="h", value=b"v")] if i % 5 == 0 else [],
        )
        for i in range(400)
    ]
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t", partition=0, records=records, compression_type=codec
    )
    monkeypatch.setattr(records_module, "BATCH_SIZE", 20_000)
    python, c = await both(request)
    assert c == python
    [(_, [(_, data)])] = c[0]
    assert batch_count(data) >= 10


def batch_count(data: bytes) -> int:
    count = pos = 0
    while pos < len(data):  # base offset (8 bytes), then the batch length (4)
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        count += 1
    assert pos == len(data)
    return count


async def test_the_real_batch_size_is_split_alike() -> None:
    value = b"x" * 10_000
    records = [common_pb2.Record(value=value, has_value=True) for _ in range(150)]  # 1.5 MB
    request = gateway_pb2.ProduceRecordsRequest(topic="t", partition=1, records=records)
    python, c = await both(request)
    assert c == python
    [(_, [(_, data)])] = c[0]
    assert batch_count(data) == 2


async def test_empty_request_and_unknown_topic() -> None:
    harness, plain = fresh()
    empty = EncodedProduceRecords.parse(b"\x0a\x01t")
    assert (await plain.produce_encoded(harness.ctx(), empty, ProduceOptions())).ok == 0
    request = gateway_pb2.ProduceRecordsRequest(
        topic="nope", records=[common_pb2.Record(value=b"v")] * 2
    )
    python, c = await both(request)
    assert c == python
    beyond = gateway_pb2.ProduceRecordsRequest(
        topic="t", partition=5, records=[common_pb2.Record(value=b"v")]
    )
    python, c = await both(beyond)
    assert c == python


def test_fields_read_as_protobuf_reads_them() -> None:
    rng = random.Random(1)
    for _ in range(30):
        request = random_request(rng)
        request.acks = rng.choice((0, 1, 2, 9))
        if rng.random() < 0.3:
            request.partition = rng.choice((0, -1, 1 << 30))
        data = request.SerializeToString()
        got = EncodedProduceRecords.parse(data)
        assert got.topic == request.topic
        assert got.partition == (request.partition if request.HasField("partition") else None)
        assert (got.acks, got.timeout_ms) == (request.acks, request.timeout_ms)
        assert got.compression_type == request.compression_type
        assert got.record_count == len(request.records)
        assert got.ByteSize() == request.ByteSize()


def _record(body: bytes) -> bytes:
    """A request of topic t with one record of this (hand-made) encoding."""
    return b"\x0a\x01t" + b"\x1a" + bytes([len(body)]) + body


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05t",  # topic runs past the end
        b"\x0a\x02\xff\xfe",  # topic not UTF-8
        b"\x1a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # varint longer than 10 bytes
        b"\x1a\x80\x80\x80\x80\x10",  # a record of 4 GiB in a few bytes
        b"\x0b",  # a group (wire type 3)
        b"\x00",  # field 0
        b"\x0d\x01",  # fixed32 runs past the end
        b"\x10",  # partition without its varint
        b"\x12\x00",  # partition with the wrong wire type
    ],
)
def test_malformed_requests_are_refused_by_the_parse(data: bytes) -> None:
    with pytest.raises(ValueError, match="malformed ProduceRecordsRequest"):
        EncodedProduceRecords.parse(data)


@pytest.mark.parametrize(
    "body",
    [
        b"\x2a\x04\x0a\x02\xc3\x28",  # a header key that is not UTF-8
        b"\x2a\x03\x0a\x05ab",  # a header key past its header
        b"\x0a\x09k",  # a key past its record
        b"\x08\x01",  # key with the wrong wire type
        b"\x30",  # timestamp without its varint
        b"\x33",  # a group
    ],
)
async def test_malformed_records_are_invalid_request(body: bytes) -> None:
    harness, plain = fresh()
    request = EncodedProduceRecords.parse(_record(body))
    with pytest.raises(RiverlogError) as info:
        await plain.produce_encoded(harness.ctx(), request, ProduceOptions())
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert "malformed ProduceRecordsRequest" in info.value.message
    assert harness.storage.calls == []


def test_random_bytes_are_refused_or_read() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        data = rng.randbytes(rng.randint(0, 60))
        with contextlib.suppress(ValueError):
            produce_wire.request_fields(data)
        partition = rng.choice((None, 0, 2))
        try:
            produce_wire.request_batches(data, partition, 3, lambda: 1, 5, 99)
        except ValueError as exc:
            assert "malformed ProduceRecordsRequest" in str(exc)


async def test_damaged_requests_never_crash() -> None:
    """Random bytes flipped, cut or inserted: the C path refuses them, or takes them exactly
    as protobuf reads them (then with the Python path's batches and results)."""
    rng = random.Random(11)
    for _ in range(300):
        data = bytearray(random_request(rng).SerializeToString())
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(len(data))
            what = rng.random()
            if what < 0.5:
                data[where] = rng.randrange(256)
            elif what < 0.7:
                del data[where:]
            else:
                data[where:where] = rng.randbytes(rng.randint(1, 5))
            if not data:
                break
        raw = bytes(data)
        try:
            encoded = EncodedProduceRecords.parse(raw)
        except ValueError:
            continue
        harness, plain = fresh()
        try:
            produced = await plain.produce_encoded(harness.ctx(), encoded, ProduceOptions())
        except RiverlogError as exc:
            assert exc.code != ErrorCode.UNKNOWN_SERVER_ERROR
            continue
        request = gateway_pb2.ProduceRecordsRequest.FromString(raw)  # protobuf takes it too
        if request.topic != "t" or request.compression_type not in CODECS:
            continue
        python, c = await both(request)
        assert c[1] == convert.produced_records_to_proto(produced).SerializeToString()
        assert c == python


@pytest.fixture
async def served(served_harness: tuple[Any, Harness]) -> Any:
    """A channel to a gateway servicer on a loopback gRPC server (`served_harness`)."""
    return served_harness[0]


@pytest.fixture
async def served_harness() -> Any:
    """A gateway servicer on a loopback gRPC server (the families on in-test fakes): a channel
    to it, and the harness of its fakes."""
    harness, plain = fresh()
    families = Families(
        config=FAST,
        producer=harness.producer,
        fetcher=harness.fetcher,
        offsets=harness.offsets,
        records=plain,
        admin=Admin(harness.cache, FAST),
        metadata=None,  # type: ignore[arg-type]
    )
    server = RpcServer("127.0.0.1", 0, [(add_to_server, GatewayServicer(families), SERVICE_NAME)])
    await server.start()
    channel = aio_channel(server.address)
    try:
        yield channel, harness
    finally:
        await channel.close()
        await server.stop(0)


async def test_over_grpc_bad_bytes_are_errors_and_the_gateway_serves_on(served: Any) -> None:
    raw = served.unary_unary(f"/{SERVICE_NAME}/ProduceRecords")  # bytes in, bytes out
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await raw(b"\x0a\x05t", timeout=5)  # no request at all: as protobuf's parse fails
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed ProduceRecordsRequest" in (info.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await raw(_record(b"\x2a\x04\x0a\x02\xc3\x28"), timeout=5)  # a header key not UTF-8
    assert from_rpc_error(info.value).code == ErrorCode.INVALID_REQUEST
    stub = gateway_pb2_grpc.GatewayStub(served)
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t", partition=1, records=[common_pb2.Record(key=b"k", value=b"v")] * 3
    )
    response = await stub.ProduceRecords(request, timeout=5)
    assert [(r.partition, r.offset) for r in response.results] == [(1, 200), (1, 201), (1, 202)]


def _empty_records(count: int) -> bytes:
    """A request of topic t with `count` empty records (2 bytes each, the fewest a record takes)."""
    return b"\x0a\x01t" + b"\x1a\x00" * count


def test_the_record_cap_is_the_largest_request_over_64_bytes() -> None:
    assert records_module.MAX_REQUEST_RECORDS * 64 == MAX_MESSAGE_BYTES


@pytest.mark.parametrize("path", ["c", "python"])
async def test_too_many_records_are_refused_before_anything_is_built(
    path: str, served_harness: tuple[Any, Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request of more records than MAX_REQUEST_RECORDS (empty records: ~44 times its size
    in the gateway before the cap) gets RECORD_LIST_TOO_LARGE, nothing sent to a leader; the
    path without C counts them before protobuf makes a message of each; one at the cap goes."""
    channel, harness = served_harness
    monkeypatch.setattr(records_module, "MAX_REQUEST_RECORDS", 1000)
    if path == "python":
        monkeypatch.setattr(record_loop, "_speedups", None)
        assert not produce_wire.compiled()
        uncounted = convert.produce_records_request(_empty_records(1001))
        assert isinstance(uncounted, convert.UncountedProduceRecords)  # counted in a thread
        counted = convert.counted_produce_records_request(uncounted.data)
        assert isinstance(counted, EncodedProduceRecords)  # no protobuf message per record
        assert (counted.topic, counted.record_count) == ("t", 1001)
    raw = channel.unary_unary(f"/{SERVICE_NAME}/ProduceRecords")  # bytes in, bytes out
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await raw(_empty_records(1001), timeout=5)
    error = from_rpc_error(info.value)
    assert error.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert "at most 1000 records" in error.message
    assert harness.storage.calls == []
    answer = gateway_pb2.ProduceRecordsResponse.FromString(
        await raw(_empty_records(1000), timeout=5)
    )
    assert [r.error_code for r in answer.results] == [ErrorCode.NONE] * 1000


def test_a_request_that_cannot_be_over_the_cap_is_not_walked_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without C, a large request whose 0x1A bytes (each record's tag is one) are at most the
    cap is parsed by protobuf at once; one that may be over it is left to the handler to walk."""
    monkeypatch.setattr(records_module, "MAX_REQUEST_RECORDS", 1000)
    monkeypatch.setattr(record_loop, "_speedups", None)
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t", records=[common_pb2.Record(value=b"v" * 10)] * 400
    ).SerializeToString()
    assert len(request) > 2 * 1000 and request.count(b"\x1a") == 800  # Record.value's tag too
    parsed = convert.produce_records_request(request)
    assert isinstance(parsed, gateway_pb2.ProduceRecordsRequest) and len(parsed.records) == 400
    many = gateway_pb2.ProduceRecordsRequest(
        topic="t", records=[common_pb2.Record(value=b"v" * 10)] * 600
    ).SerializeToString()
    uncounted = convert.produce_records_request(many)
    assert isinstance(uncounted, convert.UncountedProduceRecords)
    counted = convert.counted_produce_records_request(uncounted.data)
    assert isinstance(counted, gateway_pb2.ProduceRecordsRequest) and len(counted.records) == 600


async def test_the_record_walk_runs_off_the_event_loop(
    served_harness: tuple[Any, Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without C, the field walk of a request that may be over the cap (seconds for millions of
    small records) runs in a thread, not on the event loop serving every other request."""
    channel, _ = served_harness
    monkeypatch.setattr(records_module, "MAX_REQUEST_RECORDS", 1000)
    monkeypatch.setattr(record_loop, "_speedups", None)
    walked_on = []
    count = records_module.count_records

    def spy(data: bytes, limit: int) -> Any:
        walked_on.append(threading.get_ident())
        return count(data, limit)

    monkeypatch.setattr(records_module, "count_records", spy)
    raw = channel.unary_unary(f"/{SERVICE_NAME}/ProduceRecords")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await raw(_empty_records(1001), timeout=5)
    assert from_rpc_error(info.value).code == ErrorCode.RECORD_LIST_TOO_LARGE
    answer = gateway_pb2.ProduceRecordsResponse.FromString(
        await raw(_empty_records(1000), timeout=5)
    )
    assert len(answer.results) == 1000
    assert len(walked_on) == 1 and walked_on[0] != threading.get_ident()  # the loop's thread


@pytest.mark.parametrize("throttle", [0, 1, 300, 70_000])
def test_the_results_wire_is_the_response_protobuf_writes(throttle: int) -> None:
    request = random_request(random.Random(2))
    results = [
        gateway_pb2.RecordResult(partition=i % 3, offset=i) for i in range(len(request.records))
    ]
    results[0].error_code = ErrorCode.INVALID_TIMESTAMP  # type: ignore[assignment]
    results[0].error_message = "record 0 has a negative timestamp (-1)"
    expected = gateway_pb2.ProduceRecordsResponse(results=results, throttle_time_ms=throttle)
    wire = b"".join(
        gateway_pb2.ProduceRecordsResponse(results=[r]).SerializeToString() for r in results
    )
    assert convert.produced_records_wire(wire, throttle) == expected.SerializeToString()


async def test_c_encoded_results_go_out_as_they_are(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's results, encoded in C, are sent by a pass-through serializer, not parsed
    into messages to be serialized again (decision 0045); the client reads the same answer."""
    parsed_back = []
    to_proto = convert.produced_records_to_proto

    def spy(produced: Any) -> Any:
        parsed_back.append(bool(produced.results_wire))
        return to_proto(produced)

    monkeypatch.setattr(convert, "produced_records_to_proto", spy)
    request = gateway_pb2.ProduceRecordsRequest(
        topic="t", records=[common_pb2.Record(key=b"k%d" % i, value=b"v") for i in range(20)]
    )
    raw = served.unary_unary(f"/{SERVICE_NAME}/ProduceRecords")
    answer = await raw(request.SerializeToString(), timeout=5)
    assert parsed_back == []  # not even called: the servicer answered the bytes
    monkeypatch.undo()
    python, _ = await both(request)
    assert answer == python[1]
