"""A small blocking client of the Gateway API for the gateway's integration tests: plain gRPC
stubs plus helpers to encode and decode batches, so the tests speak the wire API a client with
no SDK would (and the SDK's batch path) without depending on the SDK."""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from riverlog.common.records import BatchBuilder, CompressionType, Record, iter_batches_records
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

CLIENT_ID = "gateway-integration-test"
METADATA = ((CLIENT_ID_KEY, CLIENT_ID),)


class GatewayClient:
    """Blocking stub with the client id set and a deadline on every call."""

    def __init__(self, address: str, timeout: float = 30.0) -> None:
        self.channel = sync_channel(address)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def __getattr__(self, method: str):
        call = getattr(self.stub, method)

        def invoke(request, timeout: float | None = None):
            return call(request, timeout=timeout or self.timeout, metadata=METADATA)

        return invoke

    def stream(self, method: str, requests: Iterable, timeout: float | None = None):
        return getattr(self.stub, method)(
            iter(requests), timeout=timeout or self.timeout, metadata=METADATA
        )


def encode(values: Iterable[bytes], compression: CompressionType = CompressionType.NONE) -> bytes:
    builder = BatchBuilder(compression)
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, f"k{i}".encode(), value)
    return builder.build()


def decode(data: bytes, min_offset: int = 0) -> list[Record]:
    return list(iter_batches_records(data, min_offset))


def produce_request(
    topic: str,
    batches: dict[int, bytes],
    acks: int = common_pb2.ACKS_LEADER,
    correlation_id: int = 0,
) -> data_pb2.ProduceRequest:
    return data_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        correlation_id=correlation_id,
        partitions=[
            data_pb2.ProducePartition(topic=topic, partition=p, records=data)
            for p, data in batches.items()
        ],
    )


def fetch_request(
    topic: str,
    offsets: dict[int, int],
    max_wait_ms: int = 500,
    correlation_id: int = 0,
    min_bytes: int = 1,
) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=4 * 1024 * 1024,
        correlation_id=correlation_id,
        partitions=[
            data_pb2.FetchPartition(
                topic=topic, partition=p, fetch_offset=o, partition_max_bytes=1024 * 1024
            )
            for p, o in offsets.items()
        ],
    )


def fetch_all(client: GatewayClient, topic: str, partition: int, until: int) -> list[Record]:
    """Every record of a partition from 0 up to `until` (bounded number of fetches)."""
    out: list[Record] = []
    offset = 0
    for _ in range(50):
        if offset >= until:
            break
        response = client.Fetch(fetch_request(topic, {partition: offset}))
        [part] = response.partitions
        assert part.error_code == 0, part.error_message
        records = decode(part.records, offset)
        out.extend(records)
        if records:
            offset = records[-1].offset + 1
    return out


def plain(key: bytes | None, value: bytes | None, headers=()) -> common_pb2.Record:
    return common_pb2.Record(
        key=key or b"",
        has_key=key is not None,
        value=value or b"",
        has_value=value is not None,
        headers=[common_pb2.Header(key=k, value=v) for k, v in headers],
    )


def status_of(call) -> tuple[grpc.StatusCode, str]:
    """Run `call()`; the gRPC status code and details it failed with."""
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    raise AssertionError("the call succeeded")


__all__ = ["gateway_pb2"]
