"""GrantDataAccess's checks at the gateway (decision 0047), on a manual clock: a grant signed
with the key verifies at its node with the configured bytes and lifetime; no key, a TLS
gateway or a node without a direct port answer DELEGATION_TOKEN_AUTH_DISABLED; bad requests,
an unknown node and internal topics for WRITE are refused; the budget is charged to the
caller's byte-rate quota (capped at one sample's worth) and the throttle time returned."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest
from gateway_fakes import FakeSource, make_image

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import GrantOperation, verify_grant
from riverlog.common.quota import LocalQuotaView, QuotaResolver, QuotaType, WindowConfig
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.direct_access import DataAccess
from riverlog.services.gateway.quotas import GatewayQuotas
from riverlog.services.gateway.routing.metadata_cache import MetadataCache

KEY = b"g" * 32


def _cache(direct_port: int = 7001) -> MetadataCache:
    image = make_image(1, {"orders": [1]})
    nodes = dict(image.nodes)
    nodes[("storage", 1)] = NodeInfo("storage", 1, "10.0.0.1", 9001, direct_port=direct_port)
    nodes[("storage", 2)] = NodeInfo("storage", 2, "10.0.0.2", 9002)  # no direct port
    image = type(image)(
        version=image.version,
        cluster_id=image.cluster_id,
        nodes=MappingProxyType(nodes),
        topics=image.topics,
    )
    return MetadataCache(FakeSource(image))


def _ctx(client_id: str = "app") -> RequestContext:
    return RequestContext("GrantDataAccess", Deadline.after(30), client_id=client_id)


def _grant(
    access: DataAccess,
    op: GrantOperation | None = GrantOperation.READ,
    topics: tuple[str, ...] = ("orders",),
    node: int = 1,
) -> object:
    return asyncio.run(access.grant(_ctx(), op, list(topics), node))


def _code(access: DataAccess, **kwargs: object) -> ErrorCode:
    with pytest.raises(RiverlogError) as info:
        _grant(access, **kwargs)  # type: ignore[arg-type]
    return info.value.code


def test_a_grant_verifies_at_its_node_with_the_configured_bytes_and_lifetime() -> None:
    clock = ManualClock()
    config = GatewayConfig.from_overrides(
        {"direct.access.grant.bytes": "1000", "direct.access.grant.ms": "15000"}
    )
    access = DataAccess(config, _cache(), KEY, clock=clock)
    issued = _grant(access, GrantOperation.WRITE, ("orders", "orders", "new-topic"))
    assert (issued.host, issued.direct_port, issued.byte_budget) == ("10.0.0.1", 7001, 1000)  # type: ignore[attr-defined]
    assert issued.expires_at_ms == clock.time_ms() + 15000  # type: ignore[attr-defined]
    grant = verify_grant(issued.grant, KEY, 1, clock.time_ms())  # type: ignore[attr-defined]
    assert grant.operation == GrantOperation.WRITE
    assert grant.topics == {"orders", "new-topic"}
    assert (grant.client_id, grant.principal, grant.byte_budget) == ("app", "ANONYMOUS", 1000)


def test_a_grant_lifetime_below_the_minimum_is_refused_at_config_load() -> None:
    with pytest.raises(RiverlogError) as info:
        GatewayConfig.from_overrides({"direct.access.grant.ms": "1000"})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "direct.access.grant.ms" in info.value.message and "10000" in info.value.message
    assert GatewayConfig.from_overrides({"direct.access.grant.ms": "10000"})


def test_no_key_a_tls_gateway_or_a_node_without_a_direct_port_disable_it() -> None:
    plain = GatewayConfig()
    assert _code(DataAccess(plain, _cache(), None)) == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    tls = GatewayConfig(ssl_certificate_location="c.pem", ssl_key_location="k.pem")
    assert not DataAccess(tls, _cache(), KEY).enabled
    assert _code(DataAccess(tls, _cache(), KEY)) == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    access = DataAccess(plain, _cache(), KEY)
    assert _code(access, node=2) == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_bad_requests_are_refused() -> None:
    access = DataAccess(GatewayConfig(), _cache(), KEY)
    assert _code(access, op=None) == ErrorCode.INVALID_REQUEST
    assert _code(access, topics=()) == ErrorCode.INVALID_REQUEST
    assert _code(access, topics=("bad name",)) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _code(access, node=99) == ErrorCode.UNKNOWN_NODE
    internal = ("__consumer_offsets",)
    assert _code(access, op=GrantOperation.WRITE, topics=internal) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    assert _grant(access, GrantOperation.READ, internal) is not None  # reading it is an ACL matter


def test_the_budget_is_charged_to_the_byte_rate_quota_capped_at_one_sample() -> None:
    clock = ManualClock()
    view = LocalQuotaView("gw", QuotaResolver(), clock, WindowConfig(11, 1000))
    quotas = GatewayQuotas(view, clock, recheck_ms=1)
    quotas.update_resolver(
        QuotaResolver.from_paths({"/config/clients/app": {"consumer_byte_rate": 10_000}})
    )
    config = GatewayConfig.from_overrides({"direct.access.grant.bytes": "1000000"})
    access = DataAccess(config, _cache(), KEY, quotas=quotas, clock=clock)
    first = _grant(access, GrantOperation.READ)
    assert first.byte_budget == 10_000  # type: ignore[attr-defined]
    throttles = [first.throttle_time_ms]  # type: ignore[attr-defined]
    for _ in range(20):  # until the pre-charged budgets cross the bound (then it holds)
        if throttles[-1] > 0:
            break
        throttles.append(_grant(access, GrantOperation.READ).throttle_time_ms)  # type: ignore[attr-defined]
    assert throttles[-1] > 0, throttles
    assert quotas.remaining_ms((QuotaType.FETCH,), "ANONYMOUS", "app") > 0
    # a produce grant is charged to the produce quota, which has none here
    write = _grant(access, GrantOperation.WRITE)
    assert (write.byte_budget, write.throttle_time_ms) == (1_000_000, 0)  # type: ignore[attr-defined]
