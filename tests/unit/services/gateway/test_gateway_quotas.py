"""Quota enforcement on the gateway's request path, on a manual clock: principals from call
metadata, holds before handling, throttle times in responses, empty throttled fetches, fetch
sizes capped at one quota window, and nothing at all when no quota is configured."""

from __future__ import annotations

import asyncio
import base64

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota import (
    ANONYMOUS,
    Allowance,
    LocalQuotaView,
    MetricEntity,
    QuotaAnswer,
    QuotaResolver,
    QuotaType,
    WindowConfig,
)
from riverlog.common.quota.credentials import CredentialChecker, hash_password
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.auth import Authenticator, credentials_of
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.fetch import FetchPartResult
from riverlog.services.gateway.produce import ProducePart
from riverlog.services.gateway.quotas import GatewayQuotas
from riverlog.services.gateway.rpc.request_quota import after_fetch, before_fetch, produce_size
from riverlog.v1 import data_pb2


def ctx(principal: str = ANONYMOUS, client_id: str = "app", budget_s: float = 30.0):
    return RequestContext(
        "Produce", Deadline.after(budget_s), client_id=client_id, principal=principal
    )


def quotas(configs: dict[str, dict[str, float]], clock: ManualClock) -> GatewayQuotas:
    view = LocalQuotaView("gw", QuotaResolver(), clock, WindowConfig(11, 1000))
    q = GatewayQuotas(view, clock, recheck_ms=1)
    q.update_resolver(QuotaResolver.from_paths(configs))
    return q


def produce(size: int) -> data_pb2.ProduceRequest:
    return data_pb2.ProduceRequest(
        partitions=[data_pb2.ProducePartition(topic="t", partition=0, records=b"x" * size)]
    )


# --- principals -------------------------------------------------------------------------------


def test_credentials_come_from_riverlog_keys_or_basic_auth() -> None:
    assert credentials_of([("riverlog-client-id", "x")]) is None
    assert credentials_of([("riverlog-user", "u"), ("riverlog-password", b"p")]) == ("u", "p")
    basic = "Basic " + base64.b64encode(b"bob:pa:ss").decode()
    assert credentials_of([("authorization", basic)]) == ("bob", "pa:ss")
    with pytest.raises(RiverlogError) as info:
        credentials_of([("authorization", "Basic !!!")])
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_principals_anonymous_users_and_refusals() -> None:
    checker = CredentialChecker({"alice": hash_password("alice", "pw", iterations=1000)})
    open_gateway = Authenticator(checker, allow_anonymous=True)
    assert open_gateway.principal([]) == ANONYMOUS
    assert open_gateway.principal([("riverlog-user", "alice"), ("riverlog-password", "pw")]) == (
        "alice"
    )
    for bad in (
        [("riverlog-user", "alice"), ("riverlog-password", "no")],
        [("riverlog-user", "x")],
    ):
        with pytest.raises(RiverlogError) as info:
            open_gateway.principal(bad)
        assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "unknown user or wrong password" in info.value.message
    closed = Authenticator(checker, allow_anonymous=False)
    with pytest.raises(RiverlogError, match="does not allow unauthenticated"):
        closed.principal([])


# --- enforcement ------------------------------------------------------------------------------


def test_no_quota_configured_costs_nothing_and_throttles_nothing() -> None:
    clock = ManualClock(0)
    q = quotas({}, clock)
    assert not q.active
    assert asyncio.run(q.before_produce(ctx(), 10**9)) == 0
    assert q.after_request(ctx(), 0, 10**12) == 0
    assert all(list(q.view.manager(t).entities()) == [] for t in QuotaType)


def test_produce_over_the_quota_gets_kafkas_throttle_time_and_is_held_next_time() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/clients/app": {"producer_byte_rate": 1000}}, clock)
    # Kafka's padded window: 10 000 B fit in the first 10 s; 12 000 B are 1200 B/s over
    # 10 s, so the pause is (1200 - 1000) / 1000 x 10 000 ms
    assert asyncio.run(q.before_produce(ctx(), 12_000)) == 2000
    assert q.remaining_ms((QuotaType.PRODUCE,), ANONYMOUS, "app") == 2000
    other = asyncio.run(q.before_produce(ctx(client_id="other"), 12_000))
    assert other == 0  # another client-id is another entity, and unbounded

    async def held_request() -> int:
        task = asyncio.create_task(q.before_produce(ctx(), 1))
        await asyncio.sleep(0.01)
        assert not task.done()  # held while the entity is throttled
        clock.advance(2000)
        return await task

    assert asyncio.run(held_request()) > 0  # admitted once the time passed, still over


def test_a_hold_never_outlasts_the_request_deadline() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/clients/app": {"producer_byte_rate": 1000}}, clock)
    asyncio.run(q.before_produce(ctx(), 50_000))
    throttle = asyncio.run(asyncio.wait_for(q.before_produce(ctx(budget_s=0.05), 1), 5))
    assert throttle > 0


def test_request_percentage_records_handler_time() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/users/<default>": {"request_percentage": 10}}, clock)
    # 10% of one thread over a 10 s window is 1 s of handler time; 2 s is 100% over:
    # capped at one sample (1000 ms), as Kafka bounds request throttles
    assert q.after_request(ctx("bob"), 0, 2_000_000_000) == 1000
    assert q.after_request(ctx("carol"), 7, 1_000) == 7  # carol has her own window


def test_a_fetch_over_the_quota_is_emptied_and_its_bytes_taken_back() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/clients/app": {"consumer_byte_rate": 1000}}, clock)
    request = data_pb2.FetchRequest(max_bytes=1 << 20)
    assert asyncio.run(before_fetch(q, ctx(), request)) == 0
    assert request.max_bytes == 1000  # one sample's worth of the quota
    first = [FetchPartResult(TopicPartition("t", 0), records=b"r" * 9000)]
    assert after_fetch(q, ctx(), first, 1000) == (0, first)
    second = [
        FetchPartResult(
            TopicPartition("t", 0),
            high_watermark=5,
            records=b"r" * 9000,
            aborted_transactions=((7, 1),),
        )
    ]
    throttle, answered = after_fetch(q, ctx(), second, 1000)
    assert throttle > 0
    assert answered == [FetchPartResult(TopicPartition("t", 0), high_watermark=5)]
    # the emptied answer's bytes were taken back: only the first 9000 B count
    assert q.view.manager(QuotaType.FETCH).measure(MetricEntity(None, "app"), 0) == 900
    held = asyncio.run(before_fetch(q, ctx(), data_pb2.FetchRequest()))
    assert held == throttle  # answered empty at once while held


def test_produce_size_counts_batch_bytes() -> None:
    parts = [
        ProducePart(TopicPartition("t", 0), b"x" * 10),
        ProducePart(TopicPartition("t", 1), b"y" * 5),
    ]
    assert produce_size(parts) == 15


def test_a_config_change_applies_at_once() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/clients/app": {"producer_byte_rate": 1000}}, clock)
    assert asyncio.run(q.before_produce(ctx(), 12_000)) == 2000
    q.update_resolver(
        QuotaResolver.from_paths({"/config/clients/app": {"producer_byte_rate": 1e6}})
    )
    assert q.remaining_ms((QuotaType.PRODUCE,), ANONYMOUS, "app") == 0  # raised: free now
    q.update_resolver(QuotaResolver())
    assert not q.active


def test_a_fetch_that_only_spends_the_allowance_is_delivered_and_delays_the_next() -> None:
    clock = ManualClock(0)
    q = quotas({"/config/clients/app": {"consumer_byte_rate": 1000}}, clock)
    share = Allowance(QuotaType.FETCH, MetricEntity(None, "app"), 50.0)
    q.view.apply_answer("quota-1", QuotaAnswer(allowances=(share,)), 0)
    results = [FetchPartResult(TopicPartition("t", 0), records=b"r" * 5000)]
    # 5000 B over the padded 10 s window is within 1000 B/s: delivered, though far more than
    # this interval's share; the client waits for the next answer
    assert after_fetch(q, ctx(), results, 1000) == (100, results)
    assert asyncio.run(before_fetch(q, ctx(), data_pb2.FetchRequest())) == 100


def test_open_methods_serve_anonymous_calls_where_anonymous_is_refused() -> None:
    checker = CredentialChecker({"alice": hash_password("alice", "pw", iterations=1000)})
    closed = Authenticator(checker, allow_anonymous=False)
    assert closed.principal([], anonymous_ok=True) == ANONYMOUS
    with pytest.raises(RiverlogError):
        closed.principal([("riverlog-user", "alice"), ("riverlog-password", "x")], True)
