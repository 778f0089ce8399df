"""Plain records: partitioning (given, murmur2 by key, sticky round robin without key),
encoding into batches the shared reader decodes back, per-record results in request order,
and FetchRecords decoding (skip below the offset, max_records, next_offset)."""

from collections.abc import Iterator

import pytest
from gateway_fakes import Harness, make_image

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.partitioner import partition_for_key
from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    Record,
    iter_batches_records,
    record_loop,
)
from riverlog.common.records.control import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker,
)
from riverlog.common.types import IsolationLevel, TopicPartition
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.fetch import FetchPartResult
from riverlog.services.gateway.produce import ProduceOptions, ProducePartResult
from riverlog.services.gateway.records import FetchedRecords, PlainRecords
from riverlog.services.gateway.rpc import convert
from riverlog.v1 import data_pb2, gateway_pb2


def rec(key: bytes | None, value: bytes | None = b"v", ts: int = 0, headers=()) -> Record:
    return Record(-1, ts, key, value, list(headers))


@pytest.fixture
def plain(harness: Harness) -> PlainRecords:
    return PlainRecords(harness.cache, harness.producer, harness.fetcher)


def sent_records(harness: Harness) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = {}
    for method, _, items, _ in harness.storage.calls:
        if method == "produce":
            for item in items:
                out[item.tp.partition] = list(iter_batches_records(item.records))
    return out


async def test_keyed_records_land_on_the_murmur2_partition(harness: Harness, plain) -> None:
    keys = [f"key-{i}".encode() for i in range(20)]
    results = await plain.produce(
        harness.ctx(), "t", None, [rec(k, k + b"!") for k in keys], ProduceOptions(), ""
    )
    expected = [partition_for_key(k, 3) for k in keys]
    assert [r.partition for r in results] == expected
    assert len(set(expected)) > 1
    batches = sent_records(harness)
    for p, records in batches.items():
        mine = [k for k in keys if partition_for_key(k, 3) == p]
        assert [r.key for r in records] == mine
        assert [r.value for r in records] == [k + b"!" for k in mine]
    # offsets: the partition's base offset plus the place of the record in it
    leaders = {0: 1, 1: 2, 2: 1}
    for p in set(expected):
        offsets = [r.offset for r, e in zip(results, expected, strict=True) if e == p]
        base = 100 * leaders[p]
        assert offsets == list(range(base, base + len(offsets)))


async def test_given_partition_and_fields_round_trip(harness: Harness, plain) -> None:
    records = [
        rec(None, None, ts=5),
        rec(b"", b"", headers=[("h", b"x"), ("h", b"")]),
        rec(b"k", b"v" * 1000, ts=1_700_000_000_123),
    ]
    results = await plain.produce(harness.ctx(), "t", 1, records, ProduceOptions(), "gzip")
    assert [(r.partition, r.offset, r.error_code) for r in results] == [
        (1, 200, 0),
        (1, 201, 0),
        (1, 202, 0),
    ]
    [(method, node, [item], _)] = harness.storage.calls
    assert (method, node) == ("produce", 2)
    assert item.records[21:23] == CompressionType.GZIP.to_bytes(2, "big")  # attributes: gzip
    decoded = list(iter_batches_records(item.records))
    assert [(r.key, r.value, r.headers) for r in decoded] == [
        (None, None, []),
        (b"", b"", [("h", b"x"), ("h", b"")]),
        (b"k", b"v" * 1000, []),
    ]
    assert decoded[0].timestamp == 5 and decoded[2].timestamp == 1_700_000_000_123


async def test_keyless_records_stick_per_request_and_rotate(harness: Harness, plain) -> None:
    seen = []
    for _ in range(6):
        results = await plain.produce(
            harness.ctx(), "t", None, [rec(None), rec(None), rec(None)], ProduceOptions(), ""
        )
        assert len({r.partition for r in results}) == 1  # one batch per request
        seen.append(results[0].partition)
    assert set(seen) == {0, 1, 2}


async def test_keyless_records_avoid_partitions_without_leader(harness: Harness, plain) -> None:
    await harness.source.publish(make_image(2, {"t": [1, -1, 2]}))
    seen = set()
    for _ in range(6):
        [result] = await plain.produce(harness.ctx(), "t", None, [rec(None)], ProduceOptions(), "")
        seen.add(result.partition)
    assert seen == {0, 2}


async def test_per_record_errors(harness: Harness, plain) -> None:
    results = await plain.produce(
        harness.ctx(), "t", None, [rec(b"a"), rec(b"b", ts=-7)], ProduceOptions(), ""
    )
    assert results[0].error_code == 0
    assert results[1].error_code == ErrorCode.INVALID_TIMESTAMP
    unknown = await plain.produce(
        harness.ctx(), "nope", None, [rec(b"a")] * 2, ProduceOptions(), ""
    )
    assert [r.error_code for r in unknown] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    beyond = await plain.produce(harness.ctx(), "t", 3, [rec(b"a")], ProduceOptions(), "")
    assert beyond[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    harness.storage.answer = lambda n, item: ProducePartResult(
        item.tp, ErrorCode.MESSAGE_TOO_LARGE, "big"
    )
    failed = await plain.produce(harness.ctx(), "t", 0, [rec(b"a")] * 2, ProduceOptions(), "")
    assert [(r.partition, r.offset, r.error_code) for r in failed] == [
        (0, -1, ErrorCode.MESSAGE_TOO_LARGE)
    ] * 2


@pytest.mark.parametrize(
    ("topic", "partition", "compression", "options", "code"),
    [
        ("", None, "", ProduceOptions(), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", -1, "", ProduceOptions(), ErrorCode.INVALID_REQUEST),
        ("t", None, "brotli", ProduceOptions(), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        ("t", None, "", ProduceOptions(acks=9), ErrorCode.INVALID_REQUIRED_ACKS),
    ],
)
async def test_bad_requests(
    harness: Harness, plain, topic, partition, compression, options, code
) -> None:
    with pytest.raises(RiverlogError) as info:
        await plain.produce(harness.ctx(), topic, partition, [rec(b"k")], options, compression)
    assert info.value.code == code
    assert harness.storage.calls == []


@pytest.fixture(params=["c", "python"], autouse=True)
def record_loop_in_use(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test twice: FetchRecords encodes records for the wire in C where the extension is
    built, and decodes them in Python where it is not."""
    saved = (record_loop._speedups, record_loop.decode_into)
    if request.param == "c" and not record_loop.compiled():
        pytest.skip("the _speedups C extension is not built here")
    if request.param == "python":
        record_loop._speedups = None
        record_loop.decode_into = record_loop.decode_into_py
    try:
        yield request.param
    finally:
        record_loop._speedups, record_loop.decode_into = saved


def records_of(result: FetchedRecords) -> list[Record]:
    """The fetched records, whichever form the gateway gave them in (decoded, or encoded for
    the wire by the C extension)."""
    if not result.records_wire:
        return list(result.records)
    wire = gateway_pb2.FetchRecordsResponse.FromString(bytes(result.records_wire))
    return [
        Record(r.offset, r.timestamp_ms, r.key if r.has_key else None, r.value, [])
        for r in wire.records
    ]


def fetched(*batches: tuple[int, list[bytes]]) -> bytes:
    out = b""
    for base, values in batches:
        builder = BatchBuilder()
        for v in values:
            builder.append(1000, None, v)
        data = bytearray(builder.build())
        data[0:8] = base.to_bytes(8, "big")
        out += bytes(data)
    return out


async def test_fetch_records_decodes_and_skips_below_offset(harness: Harness, plain) -> None:
    data = fetched((10, [b"a", b"b", b"c"]), (13, [b"d", b"e"]))
    harness.storage.answer = lambda n, item: FetchPartResult(
        item.tp, high_watermark=15, log_start_offset=0, records=data + data[:20]
    )
    result = await plain.fetch(
        harness.ctx(),
        TopicPartition("t", 0),
        11,
        max_records=0,
        max_bytes=0,
        max_wait_ms=100,
        isolation_level=0,
    )
    assert result.error_code == 0
    assert [(r.offset, r.value) for r in records_of(result)] == [
        (11, b"b"),
        (12, b"c"),
        (13, b"d"),
        (14, b"e"),
    ]
    assert (result.next_offset, result.high_watermark) == (15, 15)
    [(_, _, [item], options)] = harness.storage.calls
    assert (item.fetch_offset, options.min_bytes, options.max_bytes) == (11, 1, 1024 * 1024)

    limited = await plain.fetch(
        harness.ctx(),
        TopicPartition("t", 0),
        11,
        max_records=2,
        max_bytes=500,
        max_wait_ms=0,
        isolation_level=0,
    )
    assert [r.offset for r in records_of(limited)] == [11, 12]
    assert limited.next_offset == 13


async def test_fetch_records_errors(harness: Harness, plain) -> None:
    bad = await plain.fetch(
        harness.ctx(),
        TopicPartition("t", 0),
        -1,
        max_records=0,
        max_bytes=0,
        max_wait_ms=0,
        isolation_level=0,
    )
    assert bad.error_code == ErrorCode.INVALID_OFFSET and bad.records == ()
    for kwargs in ({"max_records": -1, "max_bytes": 0}, {"max_records": 0, "max_bytes": -1}):
        with pytest.raises(RiverlogError):
            await plain.fetch(
                harness.ctx(), TopicPartition("t", 0), 0, max_wait_ms=0, isolation_level=0, **kwargs
            )
    corrupt = bytearray(fetched((0, [b"a"]), (1, [b"b"])))
    corrupt[-1] ^= 0xFF
    harness.storage.answer = lambda n, item: FetchPartResult(item.tp, records=bytes(corrupt))
    result = await plain.fetch(
        harness.ctx(),
        TopicPartition("t", 0),
        0,
        max_records=0,
        max_bytes=0,
        max_wait_ms=0,
        isolation_level=0,
    )
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE
    assert [r.value for r in records_of(result)] == [b"a"]
    assert result.next_offset == 1


async def test_large_payloads_are_encoded_off_loop(harness: Harness, plain) -> None:
    big = [rec(str(i).encode(), b"x" * 4096) for i in range(600)]  # ~2.4 MB: several batches
    results = await plain.produce(harness.ctx(), "u", None, big, ProduceOptions(), "lz4")
    assert [r.offset for r in results] == list(range(300, 900))
    [(_, _, [item], _)] = harness.storage.calls
    assert [r.key for r in iter_batches_records(item.records)] == [r.key for r in big]


def test_config_is_respected() -> None:
    assert GatewayConfig().request_timeout_ms == 30_000


def at(base: int, batch: bytes) -> bytes:
    data = bytearray(batch)
    data[0:8] = base.to_bytes(8, "big")
    return bytes(data)


def txn_data(pid: int, *values: bytes) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    for v in values:
        builder.append(1000, None, v)
    return builder.build()


def txn_marker(pid: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker(EndTxnMarker(kind, 0), pid, 1, 1000)


async def test_fetch_records_read_committed_drops_aborted_transactions(
    harness: Harness, plain
) -> None:
    data = (
        at(0, txn_data(5, b"a", b"b"))  # 0-1 aborted
        + at(2, fetched((0, [b"c"])))  # 2
        + at(3, txn_marker(5, commit=False))  # 3
        + at(4, txn_data(6, b"d"))  # 4 committed
        + at(5, txn_marker(6, commit=True))  # 5
    )
    harness.storage.answer = lambda n, item: FetchPartResult(
        item.tp,
        high_watermark=9,
        last_stable_offset=6,
        records=data,
        aborted_transactions=((5, 0),),
    )

    async def fetch(level: IsolationLevel) -> FetchedRecords:
        return await plain.fetch(
            harness.ctx(),
            TopicPartition("t", 0),
            0,
            max_records=0,
            max_bytes=0,
            max_wait_ms=0,
            isolation_level=level,
        )

    committed = await fetch(IsolationLevel.READ_COMMITTED)
    assert [(r.offset, r.value) for r in records_of(committed)] == [(2, b"c"), (4, b"d")]
    assert (committed.next_offset, committed.last_stable_offset) == (6, 6)
    assert harness.storage.calls[-1][3].isolation_level == IsolationLevel.READ_COMMITTED
    response = convert.fetch_records_to_proto(committed)
    assert response.last_stable_offset == 6 and len(response.records) == 2
    uncommitted = await fetch(IsolationLevel.READ_UNCOMMITTED)  # what the leader sent, all
    assert [r.value for r in records_of(uncommitted)] == [b"a", b"b", b"c", b"d"]


def test_fetch_answer_spliced_on_the_wire_is_the_message() -> None:
    """`fetch_to_wire` (records spliced into the serialized answer) parses to exactly what
    `fetch_to_proto` builds: records of several sizes (a varint length of 1 to 3 bytes),
    none, an error, aborted transactions."""
    results = [
        FetchPartResult(
            TopicPartition("t", 0), high_watermark=9, last_stable_offset=4, records=b"a" * 100
        ),
        FetchPartResult(TopicPartition("t", 1), records=b"b" * 300, aborted_transactions=((5, 0),)),
        FetchPartResult(TopicPartition("u", 2), error_code=6, error_message="not the leader"),
        FetchPartResult(TopicPartition("t", 3), log_end_offset=7, records=b"c" * 70_000),
    ]
    wire = convert.fetch_to_wire(results, correlation_id=42, throttle_time_ms=3)
    want = convert.fetch_to_proto(results, 42)
    want.throttle_time_ms = 3
    assert data_pb2.FetchResponse.FromString(wire) == want
    assert data_pb2.FetchResponse.FromString(convert.fetch_to_wire([])) == data_pb2.FetchResponse()


def test_fetch_passes_aborted_transactions_through_unchanged() -> None:
    result = FetchPartResult(
        TopicPartition("t", 0), last_stable_offset=4, aborted_transactions=((5, 0), (7, 3))
    )
    [msg] = convert.fetch_to_proto([result]).partitions
    assert [(a.producer_id, a.first_offset) for a in msg.aborted_transactions] == [(5, 0), (7, 3)]
    assert msg.last_stable_offset == 4
