"""Gateways and the quota service together: one quota for a client spread over gateways,
allowances, holds per quota instance, fallback to the local view, at-least-once reports, and
the long-run rate of a client pushing ten times its quota."""

from __future__ import annotations

import math

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.quota import (
    Allowance,
    LocalQuotaView,
    MetricEntity,
    QuotaAnswer,
    QuotaResolver,
    QuotaType,
    ThrottleState,
    UsageDelta,
)
from riverlog.services.quota import QuotaLedger

P = QuotaType.PRODUCE
APP = MetricEntity(None, "producer")


def cluster(
    gateways: int, bound: float = 1000, path: str = "/config/clients/producer"
) -> tuple[list[LocalQuotaView], QuotaLedger, ManualClock]:
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({path: {P.key: bound}})
    views = [LocalQuotaView(f"gw{i}", resolver, clock) for i in range(gateways)]
    return views, QuotaLedger(resolver, clock), clock


def report_round(views: list[LocalQuotaView], ledger: QuotaLedger) -> list[QuotaAnswer]:
    answers = []
    for view in views:
        answer = ledger.merge(view.drain_report())
        view.apply_answer("quota-0", answer)
        answers.append(answer)
    return answers


def send(view: LocalQuotaView, value: float) -> int:
    return view.record_local(P, "alice", "producer", value)


def held(view: LocalQuotaView) -> int:
    return view.throttle_time_ms(P, "alice", "producer")


def test_a_client_spread_over_two_gateways_gets_its_quota_once():
    (g1, g2), ledger, clock = cluster(2)
    # 600 B/s through each gateway: each alone is within 1000 B/s and does not throttle
    assert send(g1, 6000) == 0
    assert send(g2, 6000) == 0
    assert g1.manager(P).measure(APP) == g2.manager(P).measure(APP) == 600
    first = report_round([g1, g2], ledger)
    # the service sums them: 1200 B/s, (1200 - 1000) / 1000 x 10 s = 2000 ms for the group
    assert ledger.measure(P, APP) == 1200
    assert first[1].holds == (ThrottleState(P, APP, 2000),)
    assert (held(g1), held(g2)) == (0, 2000)  # g1's answer came before g2's report
    report_round([g1, g2], ledger)
    assert (held(g1), held(g2)) == (2000, 2000)
    clock.advance(1999)
    assert (held(g1), held(g2)) == (1, 1)
    clock.advance(1)
    assert (held(g1), held(g2)) == (0, 0)


def test_allowances_are_paced_and_shared_among_the_gateways_carrying_the_entity():
    (g1, g2), ledger, clock = cluster(2)
    assert send(g1, 2000) == send(g2, 2000) == 0
    first = report_round([g1, g2], ledger)
    # headroom is 8000 B, but an answer hands out one interval of the bound (100 ms of
    # 1000 B/s): g1 reported first and alone, g2 then shares it with g1
    assert first[0].allowances == (Allowance(P, APP, 100),)
    assert first[1].allowances == (Allowance(P, APP, 50),)
    second = report_round([g1, g2], ledger)
    assert [a.allowances for a in second] == [(Allowance(P, APP, 50),)] * 2
    assert send(g1, 40) == 0
    assert send(g1, 20) == 100  # share spent (the crossing request is accepted, as in
    assert held(g1) == 100  # Kafka): held until the next answer is due
    clock.advance(40)
    assert held(g1) == 60
    assert send(g2, 50) == 60  # g2's share is its own, spent exactly: held until its next answer
    answers = report_round([g1, g2], ledger)
    assert all(a.holds == () for a in answers)
    # the next share is paced by the time since each gateway's last report (40 ms, taken as
    # one interval at least); g1's 10 B overspend is repaid from its new share
    assert [a.allowances[0].value for a in answers] == [50.0, 50.0]
    assert send(g1, 39) == 0
    assert send(g1, 1) == 100
    assert send(g2, 49) == 0


def test_usage_while_a_report_is_in_flight_counts_against_its_allowance():
    (g1,), ledger, _ = cluster(1)
    send(g1, 2000)
    report = g1.drain_report()
    send(g1, 60)  # recorded after the report left
    answer = ledger.merge(report)
    assert answer.allowances == (Allowance(P, APP, 100),)
    g1.apply_answer("quota-0", answer)
    assert send(g1, 39) == 0
    assert send(g1, 2) == 100


def test_stale_allowances_are_ignored_and_the_local_view_enforces_alone():
    (g1,), ledger, clock = cluster(1)
    send(g1, 2000)
    report_round([g1], ledger)
    send(g1, 8000)
    assert held(g1) == 100  # allowance spent
    clock.advance(301)  # no answer for 3 report intervals: the service is unreachable
    assert held(g1) == 0  # 10 000 B over 10.301 s is within the bound locally
    # alone, the gateway still judges what it sees, with Kafka's formula:
    # X = (total - bound x window) / bound = (11 500 - 10 301) / 1000 s
    assert send(g1, 1500) == 1199


def test_a_gateway_on_its_own_throttles_like_a_kafka_broker():
    (g1,), _, clock = cluster(1)
    throttles = []
    for _ in range(7):
        throttles.append(send(g1, 1500))
        clock.advance(1000)
    # at 6 s: 10 500 B over 10 s = 1050 B/s; (1050 - 1000) / 1000 x 10 s = 500 ms
    assert throttles == [0, 0, 0, 0, 0, 0, 500]


def test_holds_are_replaced_per_quota_instance():
    (g1,), _, clock = cluster(1, path="/config/clients/<default>")
    other = MetricEntity(None, "other")
    g1.apply_answer("quota-0", QuotaAnswer(holds=(ThrottleState(P, APP, 500),)))
    g1.apply_answer(
        "quota-1",
        QuotaAnswer(holds=(ThrottleState(P, other, 800), ThrottleState(P, APP, 0))),
    )
    assert held(g1) == 500
    assert g1.throttle_time_ms(P, "bob", "other") == 800
    g1.apply_answer("quota-0", QuotaAnswer())  # quota-0 lifted its hold
    assert held(g1) == 0
    assert g1.throttle_time_ms(P, "bob", "other") == 800
    clock.advance(300)
    g1.forget_source("quota-1")
    assert g1.throttle_time_ms(P, "bob", "other") == 0


def test_a_retried_report_is_merged_once():
    (g1, g2), ledger, _ = cluster(2)
    send(g1, 3000)
    report = g1.drain_report()
    first = ledger.merge(report)
    again = ledger.merge(report)
    assert ledger.measure(P, APP) == 300
    assert again == first  # still the current answer
    send(g2, 1000)
    other = g2.drain_report()
    assert other.seq == report.seq  # sequences are per gateway incarnation
    ledger.merge(other)
    assert ledger.measure(P, APP) == 400


def test_a_report_that_did_not_arrive_can_be_folded_into_the_next():
    (g1,), _, _ = cluster(1)
    send(g1, 3000)
    lost = g1.drain_report()
    g1.requeue(lost)
    send(g1, 500)
    report = g1.drain_report()
    assert report.deltas == (UsageDelta(P, APP, 3500),)
    assert (report.gateway_id, report.seq, report.interval_ms) == ("gw0", lost.seq + 1, 100)


def test_reports_split_by_owning_quota_instance():
    (g1,), _, _ = cluster(1, path="/config/clients/<default>")
    for i in range(50):
        g1.record_local(P, "alice", f"client-{i}", 10)
    report = g1.drain_report()
    parts = report.split([4, 2, 7])  # node ids, in any order: shards over them sorted
    assert set(parts) == {2, 4, 7}
    assert sorted(d.entity.key for part in parts.values() for d in part.deltas) == sorted(
        d.entity.key for d in report.deltas
    )
    for node_id, part in parts.items():
        assert all([2, 4, 7][d.entity.shard(3)] == node_id for d in part.deltas)
        assert (part.gateway_id, part.seq, part.interval_ms) == ("gw0", report.seq, 100)


def test_an_unrecorded_fetch_gives_its_usage_and_allowance_back():
    (g1, g2), ledger, _ = cluster(2)
    send(g1, 2000)
    send(g2, 2000)
    report_round([g1, g2], ledger)
    report_round([g1, g2], ledger)  # 3000 each
    assert send(g1, 3500) == 100  # over g1's share (not over the bound locally: 550 B/s)
    g1.unrecord_local(P, "alice", "producer", 3500)  # answered empty instead, as Kafka does
    assert held(g1) == 0
    assert g1.manager(P).measure(APP) == 200
    assert g1.drain_report().deltas == ()


def test_a_fetch_throttled_locally_stays_throttled_after_the_unrecord():
    (g1,), _, _ = cluster(1)
    assert send(g1, 11_000) == 1000  # (11 000 - 10 000) / 1000 s
    g1.unrecord_local(P, "alice", "producer", 11_000)
    assert held(g1) == 1000  # Kafka keeps the channel muted for the throttle it answered


def test_connections_without_a_quota_are_not_accounted():
    (g1,), ledger, _ = cluster(1)
    assert g1.record_local(QuotaType.FETCH, "alice", "producer", 1e9) == 0
    assert g1.record_local(P, "alice", "consumer", 1e9) == 0
    assert g1.throttle_time_ms(P, "alice", "consumer") == 0
    assert g1.max_value_in_quota_window(P, "alice", "consumer") == math.inf
    assert g1.max_value_in_quota_window(P, "alice", "producer") == 10_000
    report = g1.drain_report()
    assert report.deltas == ()
    assert ledger.merge(report) == QuotaAnswer()


def test_request_time_is_reported_as_a_percentage():
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({"/config/users/ANONYMOUS": {"request_percentage": 1}})
    view = LocalQuotaView("gw0", resolver, clock)
    assert view.record_request_time(None, "any", 10_000_000) == 0  # 10 ms: 1 % of 1 s
    (delta,) = view.drain_report().deltas
    assert delta.quota_type is QuotaType.REQUEST
    assert delta.entity == MetricEntity("ANONYMOUS", None)
    assert delta.value == pytest.approx(1.0)


def test_a_config_change_reaches_cached_resolutions_and_frees_held_clients():
    (g1,), _, _ = cluster(1)
    assert send(g1, 20_000) == 10_000  # 2000 B/s against 1000
    raised = QuotaResolver.from_paths({"/config/clients/producer": {P.key: 4000}})
    g1.update_resolver(raised)
    resolved = g1.resolve(P, "alice", "producer")
    assert resolved is not None and resolved.bound == 4000
    assert held(g1) == 0


def test_the_ledger_shares_allowances_for_a_window_and_forgets_idle_gateways():
    (g1,), ledger, clock = cluster(1)
    send(g1, 1000)
    report_round([g1], ledger)
    clock.advance(10_999)
    assert report_round([g1], ledger)[0].allowances != ()  # still served within the window
    clock.advance(1)
    assert report_round([g1], ledger)[0].allowances == ()
    clock.advance(3_600_000)
    assert ledger.expire_inactive() == 1  # the entity, idle for an hour
    old = g1.drain_report()
    assert ledger.merge(old) == QuotaAnswer()  # a new incarnation starting over is not ignored


def simulate(gateways: int, seconds: int = 300, bound: float = 100_000) -> float:
    """A producer offering 10x its quota in 10 KB batches, round robin over the gateways,
    honouring throttle times per gateway; gateways report every 100 ms. Returns accepted
    bytes per second as a fraction of the quota."""
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({"/config/clients/producer": {P.key: bound}})
    views = [LocalQuotaView(f"gw{i}", resolver, clock) for i in range(gateways)]
    ledger = QuotaLedger(resolver, clock)
    accepted = 0
    wait_until = [0] * gateways
    for step in range(seconds * 100):
        now = clock.monotonic_ms()
        i = step % gateways
        if now >= wait_until[i] and views[i].throttle_time_ms(P, "app", "producer") == 0:
            wait_until[i] = now + views[i].record_local(P, "app", "producer", 10_000)
            accepted += 10_000
        if now % 100 == 0:
            report_round(views, ledger)
        clock.advance(10)
    return accepted / seconds / bound


@pytest.mark.parametrize("gateways", [1, 2, 3])
def test_a_client_pushing_ten_times_its_quota_is_held_to_it_in_the_long_run(gateways):
    assert simulate(gateways) == pytest.approx(1.0, abs=0.03)
