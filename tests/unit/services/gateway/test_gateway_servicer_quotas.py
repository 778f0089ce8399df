"""Quotas and principals through the real Gateway servicer on a loopback server (families on
in-test fakes): a wrong password is UNAUTHENTICATED, every produce and fetch path — unary and
streams — carries throttle_time_ms once the entity is over its quota, and the principal is the
user the call authenticated as."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import SystemClock
from riverlog.common.quota import LocalQuotaView, QuotaResolver
from riverlog.common.quota.credentials import CredentialChecker, hash_password
from riverlog.common.records import BatchBuilder
from riverlog.common.rpc.channel import CLIENT_ID_KEY, aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.services.gateway.admin import Admin
from riverlog.services.gateway.auth import Authenticator
from riverlog.services.gateway.fetch import FetchPartResult
from riverlog.services.gateway.quotas import GatewayQuotas
from riverlog.services.gateway.records import PlainRecords
from riverlog.services.gateway.rpc.servicer import (
    SERVICE_NAME,
    Families,
    GatewayServicer,
    add_to_server,
)
from riverlog.v1 import data_pb2, gateway_pb2_grpc

ALICE = (("riverlog-user", "alice"), ("riverlog-password", "pw"), (CLIENT_ID_KEY, "app"))


class _NoMetadata:
    async def call(self, method, request, deadline):
        raise AssertionError("no admin call expected")


@pytest.fixture
async def stub():
    h = Harness(make_image(1, {"t": [1, 2]}), FAST)

    async def fetch(node, options, parts, deadline):  # 6000 B of records per partition
        return [FetchPartResult(p.tp, high_watermark=10, records=b"r" * 6000) for p in parts]

    h.storage.fetch = fetch
    clock = SystemClock()
    quotas = GatewayQuotas(LocalQuotaView("gw", QuotaResolver(), clock), clock, recheck_ms=5)
    # 1000 B/s for alice: her padded window takes 10 000 B before any throttle
    quotas.update_resolver(
        QuotaResolver.from_paths(
            {"/config/users/alice": {"producer_byte_rate": 1000, "consumer_byte_rate": 1000}}
        )
    )
    async with _serving(h, quotas) as stub:
        yield stub


@contextlib.asynccontextmanager
async def _serving(h: Harness, quotas: GatewayQuotas) -> AsyncIterator[Any]:
    checker = CredentialChecker({"alice": hash_password("alice", "pw", iterations=1000)})
    families = Families(
        config=FAST,
        producer=h.producer,
        fetcher=h.fetcher,
        offsets=h.offsets,
        records=PlainRecords(h.cache, h.producer, h.fetcher),
        admin=Admin(h.cache, FAST),
        metadata=_NoMetadata(),  # type: ignore[arg-type]  # no admin calls here
        quotas=quotas,
        auth=Authenticator(checker, allow_anonymous=True),
    )
    servicer = GatewayServicer(families)
    server = RpcServer(
        "127.0.0.1",
        0,
        [(add_to_server, servicer, SERVICE_NAME)],
        interceptors=servicer.interceptors(),
    )
    await server.start()
    channel = aio_channel(server.address)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        await channel.close()
        await server.stop(0)


def _produce(size: int, correlation_id: int = 0) -> data_pb2.ProduceRequest:
    builder = BatchBuilder()
    builder.append(1, None, b"v" * size)
    return data_pb2.ProduceRequest(
        correlation_id=correlation_id,
        partitions=[data_pb2.ProducePartition(topic="t", partition=0, records=builder.build())],
    )


async def test_a_wrong_password_is_unauthenticated(stub) -> None:
    bad = (("riverlog-user", "alice"), ("riverlog-password", "nope"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Produce(_produce(10), metadata=bad, timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "authentication failed for user 'alice'" in info.value.details()


async def test_unary_produce_over_the_quota_carries_a_throttle_time(stub) -> None:
    first = await stub.Produce(_produce(6000), metadata=ALICE, timeout=5)
    assert first.throttle_time_ms == 0
    second = await stub.Produce(_produce(6000), metadata=ALICE, timeout=5)
    assert second.throttle_time_ms > 0 and second.partitions[0].error_code == 0
    anonymous = await stub.Produce(_produce(50_000), metadata=((CLIENT_ID_KEY, "app"),))
    assert anonymous.throttle_time_ms == 0  # ANONYMOUS has no quota here


async def test_streams_carry_throttle_times(stub) -> None:
    async def requests():
        for i in range(3):
            yield _produce(6000, correlation_id=i)

    answers = [r async for r in stub.ProduceStream(requests(), metadata=ALICE, timeout=10)]
    assert sorted(r.correlation_id for r in answers) == [0, 1, 2]
    assert max(r.throttle_time_ms for r in answers) > 0

    async def fetches():
        for i in range(3):
            yield data_pb2.FetchRequest(
                correlation_id=i,
                max_wait_ms=0,
                partitions=[data_pb2.FetchPartition(topic="t", partition=0, fetch_offset=0)],
            )

    fetched = [r async for r in stub.FetchStream(fetches(), metadata=ALICE, timeout=10)]
    assert sorted(r.correlation_id for r in fetched) == [0, 1, 2]
    throttled = [r for r in fetched if r.throttle_time_ms > 0]
    assert throttled and all(not p.records for r in throttled for p in r.partitions)


async def test_a_stream_request_held_by_its_quota_keeps_its_place_in_the_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ProduceStream request is numbered in its stream's order (which decides whether a
    partition may be re-sent after a stale route) as it arrives, before its quota's await: one
    held by its quota stays ahead of a later request of the same partition."""
    h = Harness(make_image(1, {"t": [1, 2]}), FAST)
    held, gate = asyncio.Event(), asyncio.Event()

    class HoldFirst(GatewayQuotas):
        async def before_produce(self, ctx: Any, size: int) -> int:
            if not held.is_set():
                held.set()
                await gate.wait()  # until a later request was produced
            return await super().before_produce(ctx, size)

    clock = SystemClock()
    quotas = HoldFirst(LocalQuotaView("gw", QuotaResolver(), clock), clock, recheck_ms=5)
    numbers: dict[bytes, int] = {}
    real = h.producer.produce_or_fail

    async def spy(ctx: Any, options: Any, parts: Any, **kwargs: Any) -> Any:
        number = kwargs.get("number")
        if number is None:  # numbered inside, as it arrives there
            number = kwargs["order"]._count + 1
        numbers[bytes(parts[0].records)] = number
        gate.set()
        return await real(ctx, options, parts, **kwargs)

    monkeypatch.setattr(h.producer, "produce_or_fail", spy)
    first, second = _produce(10, correlation_id=1), _produce(20, correlation_id=2)

    async def requests() -> AsyncIterator[data_pb2.ProduceRequest]:
        yield first
        await held.wait()  # the first is at its quota
        yield second

    async with _serving(h, quotas) as stub:
        answers = [r async for r in stub.ProduceStream(requests(), timeout=10)]
    assert sorted(r.correlation_id for r in answers) == [1, 2]
    assert numbers == {first.partitions[0].records: 1, second.partitions[0].records: 2}
