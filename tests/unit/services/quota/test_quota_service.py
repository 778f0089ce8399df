"""The quota service process's pieces: its settings (Kafka's window keys, clear refusals) and
the ReportUsage handler (merge, judge, answer with remaining hold times)."""

from __future__ import annotations

import asyncio

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota import MetricEntity, QuotaResolver, QuotaType, UsageDelta, UsageReport
from riverlog.common.quota.convert import report_to_proto
from riverlog.services.quota import QuotaLedger
from riverlog.services.quota.config import QuotaConfig
from riverlog.services.quota.rpc.servicer import QuotaServicer
from riverlog.v1 import quota_pb2


def test_settings_use_kafkas_window_keys() -> None:
    config = QuotaConfig.from_overrides({"quota.window.num": "5", "quota.window.size.seconds": "2"})
    assert (config.window.samples, config.window.sample_ms) == (5, 2000)
    assert QuotaConfig.from_overrides({}).window.samples == 11


@pytest.mark.parametrize(
    ("overrides", "text"),
    [
        ({"quota.window.nmu": "5"}, "unknown quota setting"),
        ({"quota.window.num": "0"}, "must be at least 1"),
        ({"quota.window.size.seconds": "x"}, "expected an integer"),
    ],
)
def test_bad_settings_are_refused(overrides: dict[str, str], text: str) -> None:
    with pytest.raises(RiverlogError, match=text) as info:
        QuotaConfig.from_overrides(overrides)
    assert info.value.code == ErrorCode.INVALID_CONFIG


def test_report_usage_answers_with_the_clusters_holds() -> None:
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({"/config/clients/app": {"producer_byte_rate": 1000}})
    servicer = QuotaServicer(QuotaLedger(resolver, clock), clock)
    entity = MetricEntity(None, "app")
    for gateway in ("gw-1", "gw-2"):
        report = UsageReport(gateway, 1, (UsageDelta(QuotaType.PRODUCE, entity, 6000.0),))
        answer = asyncio.run(servicer.ReportUsage(report_to_proto(report), None))
    # 12 000 B from two gateways over the padded 10 s window: 2000 ms, from both
    assert [(h.quota_type, h.entity.client_id, h.remaining_ms) for h in answer.holds] == [
        ("producer_byte_rate", "app", 2000)
    ]
    bad = quota_pb2.ReportUsageRequest(gateway_id="gw-1", seq=2)
    bad.deltas.add(quota_type="nope", value=1.0).entity.client_id = "app"
    refused = asyncio.run(servicer.ReportUsage(bad, None))
    assert refused.error_code == ErrorCode.INVALID_REQUEST
