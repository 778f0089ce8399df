"""The gateway's background reports: usage split by owning quota instance (shard order by node
id), every instance asked each round, answers merged into the local view, and an unreachable
instance logged once while its part of the usage waits for the next report."""

from __future__ import annotations

import asyncio
import logging
from types import MappingProxyType

import grpc
import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.quota import LocalQuotaView, MetricEntity, QuotaResolver, QuotaType
from riverlog.common.quota.convert import report_from_proto
from riverlog.services.gateway.peers.quota import QuotaReporter
from riverlog.v1 import quota_pb2

P = QuotaType.PRODUCE


def image(*quota_ids: int) -> ClusterImage:
    nodes = {("quota", n): NodeInfo("quota", n, "127.0.0.1", 7000 + n) for n in quota_ids}
    return ClusterImage(version=1, nodes=MappingProxyType(nodes))


class Unreachable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class FakeStub:
    def __init__(self, node_id: int, hold_ms: int = 0) -> None:
        self.node_id = node_id
        self.reports: list[quota_pb2.ReportUsageRequest] = []
        self.down = False
        self.hold_ms = hold_ms

    async def ReportUsage(self, request, timeout):
        if self.down:
            raise Unreachable()
        self.reports.append(request)
        response = quota_pb2.ReportUsageResponse()
        for delta in request.deltas:
            if self.hold_ms:
                response.holds.add(
                    quota_type=delta.quota_type, entity=delta.entity, remaining_ms=self.hold_ms
                )
        return response


def reporter(current: list[ClusterImage], stubs: dict[int, FakeStub]):
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({"/config/clients/<default>": {P.key: 1e9}})
    view = LocalQuotaView("gw", resolver, clock)
    r = QuotaReporter(view, lambda: current[0], clock)
    r._stub = lambda node: stubs[node.node_id]  # type: ignore[method-assign]
    return r, view


def test_usage_goes_to_the_owning_instance_and_every_instance_is_asked() -> None:
    stubs = {1: FakeStub(1), 2: FakeStub(2, hold_ms=500)}
    r, view = reporter([image(2, 1)], stubs)
    clients = [f"c{i}" for i in range(20)]
    for client in clients:
        view.record_local(P, None, client, 100.0)
    asyncio.run(r.report_once())
    seen = {}
    for node_id, stub in stubs.items():
        assert len(stub.reports) == 1  # asked even if it owns nothing of this report
        for delta in report_from_proto(stub.reports[0]).deltas:
            seen[delta.entity.client_id] = node_id
            # shard order is by node id: shard 0 is node 1, shard 1 is node 2
            assert delta.entity.shard(2) == node_id - 1
    assert sorted(seen) == sorted(clients)
    owned_by_2 = [c for c, n in seen.items() if n == 2]
    assert owned_by_2 and all(
        view.throttle_time_ms(P, None, c) == 500 for c in owned_by_2
    )  # node 2's holds are applied
    assert all(view.throttle_time_ms(P, None, c) == 0 for c, n in seen.items() if n == 1)


def test_an_unreachable_instance_is_logged_once_and_its_usage_reported_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stub = FakeStub(1)
    stub.down = True
    r, view = reporter([image(1)], {1: stub})
    view.record_local(P, None, "app", 100.0)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            asyncio.run(r.report_once())
    warnings = [rec for rec in caplog.records if "unreachable" in rec.getMessage()]
    assert len(warnings) == 1
    stub.down = False
    with caplog.at_level(logging.INFO):
        asyncio.run(r.report_once())
    assert any("reachable again" in rec.getMessage() for rec in caplog.records)
    deltas = report_from_proto(stub.reports[-1]).deltas
    assert [(d.entity, d.value) for d in deltas] == [(MetricEntity(None, "app"), 100.0)]


def test_without_quota_instances_the_local_view_enforces_alone() -> None:
    r, view = reporter([image()], {})
    view.record_local(P, None, "app", 100.0)
    asyncio.run(r.report_once())  # nothing to send to, nothing fails
    assert r.reports_sent == 0
