"""The quota protos and back: entities as Kafka's components (no name = <default>), reports and
answers (holds cross processes as their remaining time), and the published image."""

from __future__ import annotations

import pytest

from riverlog.common.errors import RiverlogError
from riverlog.common.quota import (
    DEFAULT,
    Allowance,
    MetricEntity,
    QuotaAnswer,
    QuotaEntity,
    QuotaType,
    ThrottleState,
    UsageDelta,
    UsageReport,
)
from riverlog.common.quota.convert import (
    answer_from_proto,
    answer_to_proto,
    entity_from_proto,
    entity_label,
    entity_to_proto,
    image_from_proto,
    image_to_proto,
    report_from_proto,
    report_to_proto,
)
from riverlog.common.quota.credentials import hash_password
from riverlog.v1 import admin_pb2, quota_pb2

P, F = QuotaType.PRODUCE, QuotaType.FETCH


@pytest.mark.parametrize(
    "entity",
    [
        QuotaEntity("alice", None),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, "app/1"),
        QuotaEntity(None, DEFAULT),
        QuotaEntity("alice", DEFAULT),
        QuotaEntity(DEFAULT, "app"),
    ],
)
def test_entities_round_trip(entity: QuotaEntity) -> None:
    assert entity_from_proto(entity_to_proto(entity)) == entity


def test_default_is_an_absent_name_and_bad_components_are_refused() -> None:
    msg = entity_to_proto(QuotaEntity(DEFAULT, "app"))
    assert not msg.components[0].HasField("name") and msg.components[1].name == "app"
    assert entity_label(msg) == "user=<default>,client-id=app"
    twice = admin_pb2.ClientQuotaEntity()
    twice.components.add(entity_type="user", name="a")
    twice.components.add(entity_type="user", name="b")
    with pytest.raises(RiverlogError, match="given twice"):
        entity_from_proto(twice)
    with pytest.raises(RiverlogError, match="names a user, a client-id or both"):
        entity_from_proto(admin_pb2.ClientQuotaEntity())


def test_reports_and_answers_round_trip_with_holds_on_the_receivers_clock() -> None:
    report = UsageReport(
        "gw-1",
        7,
        (UsageDelta(P, MetricEntity("u", None), 10.0), UsageDelta(F, MetricEntity(None, ""), 2.5)),
        interval_ms=120,
    )
    assert report_from_proto(report_to_proto(report)) == report
    answer = QuotaAnswer(
        holds=(
            ThrottleState(P, MetricEntity("u", None), 1_500),
            ThrottleState(F, MetricEntity(None, "x"), 900),
        ),
        allowances=(Allowance(P, MetricEntity(None, "a"), 42.0),),
    )
    wire = answer_to_proto(answer, now_ms=1_000)  # the second hold has ended: not sent
    assert [h.remaining_ms for h in wire.holds] == [500]
    back = answer_from_proto(wire, now_ms=50_000)
    assert back.holds == (ThrottleState(P, MetricEntity("u", None), 50_500),)
    assert back.allowances == answer.allowances


def test_bad_reports_are_refused() -> None:
    bad = quota_pb2.ReportUsageRequest(gateway_id="g", seq=1)
    bad.deltas.add(quota_type="bytes", value=1.0).entity.user = "u"
    with pytest.raises(RiverlogError, match="bad usage report"):
        report_from_proto(bad)


def test_the_image_carries_resolvable_configs_and_credentials() -> None:
    alice = hash_password("alice", "pw", iterations=1000)
    image = image_to_proto(9, {QuotaEntity("alice", None): {P: 1000.0}}, [alice])
    resolver, users = image_from_proto(image)
    resolved = resolver.resolve(P, "alice", "any")
    assert resolved is not None and resolved.bound == 1000.0
    assert users == {"alice": alice}
