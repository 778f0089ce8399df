"""Handing quota windows to an entity's next owner: the ownership function the gateways split
by, which keys move when the instance set changes, and merging a handed window (usage adds up,
never lowers; holds keep the later end) across processes with different clocks."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.quota import MetricEntity, QuotaResolver, QuotaType, UsageDelta, UsageReport
from riverlog.common.quota.convert import handover_from_proto, handover_to_proto
from riverlog.common.quota.handover import WindowHandover, moves, owner_of
from riverlog.common.quota.window import SampledRate, WindowConfig
from riverlog.services.quota import QuotaLedger
from riverlog.services.quota.rpc.servicer import QuotaServicer
from riverlog.v1 import quota_pb2

RESOLVER = QuotaResolver.from_paths({"/config/clients/app": {"producer_byte_rate": 1000}})
APP = MetricEntity(None, "app")


@given(
    st.lists(st.text(min_size=1), min_size=1, max_size=30), st.sets(st.integers(1, 9), min_size=1)
)
def test_gateways_split_reports_by_the_owner_the_instances_hand_windows_to(
    clients: list[str], owners: set[int]
) -> None:
    ordered = sorted(owners)
    deltas = tuple(UsageDelta(QuotaType.PRODUCE, MetricEntity(None, c), 1.0) for c in clients)
    parts = UsageReport("gw", 1, deltas).split(ordered)
    assert sum(len(p.deltas) for p in parts.values()) == len(deltas)
    for node_id, part in parts.items():
        assert {owner_of(d.entity, list(owners)) for d in part.deltas} == {node_id}
        # Kafka-style modulo sharding over the instances ordered by node id
        assert {ordered[d.entity.shard(len(ordered))] for d in part.deltas} == {node_id}


def test_only_keys_owned_elsewhere_move_and_the_last_instance_keeps_its_own() -> None:
    keys = [(QuotaType.PRODUCE, MetricEntity(None, f"c{i}")) for i in range(40)]
    out = moves(keys, 1, [1, 2, 3])
    assert set(out) <= {2, 3} and sum(map(len, out.values())) > 0
    assert all(owner_of(e, [1, 2, 3]) == owner for owner, ks in out.items() for _, e in ks)
    assert moves(keys, 1, [1]) == {} and moves(keys, 1, []) == {}


def test_absorbed_samples_add_to_the_receivers_usage_on_its_own_clock() -> None:
    config = WindowConfig(11, 1000)
    sender, receiver = SampledRate(config), SampledRate(config)
    for t in range(0, 8000, 500):  # sender's clock
        sender.record(100.0, t)
    receiver.record(50.0, 100_000)  # receiver's clock is far ahead
    receiver.absorb(sender.export(8000), 100_000)
    assert receiver.total(100_000) == 16 * 100.0 + 50.0
    # the same rate as the sender's plus the receiver's own usage, over the same window
    assert receiver.measure(100_000) >= sender.measure(8000)
    receiver.record(10.0, 100_001)  # recording goes on into the newest sample
    assert receiver.total(100_001) == 1660.0


@given(st.lists(st.tuples(st.integers(0, 30_000), st.floats(0, 1e6)), max_size=60))
def test_absorbing_never_drops_usage_still_in_either_window(
    events: list[tuple[int, float]],
) -> None:
    config = WindowConfig(5, 1000)
    a, b = SampledRate(config), SampledRate(config)
    for i, (t, v) in enumerate(sorted(events)):
        (a if i % 2 else b).record(v, t)
    now = max((t for t, _ in events), default=0)
    expected = a.total(now) + b.total(now)
    b.absorb(a.export(now), now)
    assert abs(b.total(now) - expected) <= 1e-6 * max(expected, 1.0)
    assert len(b.export(now)) <= config.samples + 1


def test_ledger_hands_out_what_it_does_not_own_and_the_receiver_keeps_the_hold() -> None:
    old_clock, new_clock = ManualClock(0), ManualClock(50_000)
    old, new = QuotaLedger(RESOLVER, old_clock), QuotaLedger(RESOLVER, new_clock)
    old.merge(UsageReport("gw", 1, (UsageDelta(QuotaType.PRODUCE, APP, 30_000.0),)), 0)
    held = old.manager(QuotaType.PRODUCE).remaining_throttle_ms(APP, 0)
    assert held > 0
    other = 2 if owner_of(APP, [1, 2]) == 2 else 1
    me = 3 - other
    out = old.hand_out(me, [1, 2], 0)
    assert list(out) == [other] and [w.entity for w in out[other]] == [APP]
    assert old.measure(QuotaType.PRODUCE, APP, 0) == 0.0  # the window left with it
    # what crosses the wire comes back the same
    wire = handover_from_proto(handover_to_proto(WindowHandover(me, tuple(out[other]), True, 5)))
    assert wire.leaving and wire.windows == tuple(out[other])
    new.absorb(list(wire.windows), 50_000)
    assert new.measure(QuotaType.PRODUCE, APP, 50_000) == 3000.0
    assert new.manager(QuotaType.PRODUCE).remaining_throttle_ms(APP, 50_000) == held


def test_servicer_merges_a_handover_and_refuses_a_bad_one_unchanged() -> None:
    clock = ManualClock(0)
    ledger = QuotaLedger(RESOLVER, clock)
    leaving: list[tuple[int, int]] = []
    servicer = QuotaServicer(ledger, clock, lambda node, inc: leaving.append((node, inc)))
    bad = quota_pb2.HandOverWindowsRequest(from_node_id=2, leaving=True)
    bad.windows.add(quota_type="producer_byte_rate", entity=quota_pb2.QuotaMetricEntity())
    refused = asyncio.run(servicer.HandOverWindows(bad, None))  # type: ignore[arg-type]
    assert refused.error_code == ErrorCode.INVALID_REQUEST and "entity" in refused.error_message
    assert ledger.keys() == [] and leaving == []
    good = quota_pb2.HandOverWindowsRequest(from_node_id=2, leaving=True, from_incarnation=9)
    window = good.windows.add(quota_type="producer_byte_rate", throttle_remaining_ms=700)
    window.entity.client_id = "app"
    window.samples.add(start_age_ms=900, last_event_age_ms=100, value=500.0, event_count=3)
    assert asyncio.run(servicer.HandOverWindows(good, None)).error_code == ErrorCode.NONE  # type: ignore[arg-type]
    # 500 B in a sample started 900 ms ago, over the padded window of 10.9 s
    assert leaving == [(2, 9)] and ledger.measure(QuotaType.PRODUCE, APP, 0) == pytest.approx(
        500 / 10.9
    )
    assert ledger.manager(QuotaType.PRODUCE).remaining_throttle_ms(APP, 0) == 700


def test_the_periodic_sweep_looks_only_at_entities_reported_since_the_last() -> None:
    ledger = QuotaLedger(RESOLVER, ManualClock(0))
    clients = [MetricEntity(None, f"c{i}") for i in range(20)]
    deltas = tuple(UsageDelta(QuotaType.PRODUCE, e, 10.0) for e in clients)
    ledger.merge(UsageReport("gw", 1, deltas), 0)
    assert ledger.hand_out(1, [1], 0) == {}  # owns all: nothing moves, recent cleared
    # the set grows to {1, 2}: a quiet sweep sees nothing new, a full one moves 2's share
    assert ledger.hand_out(1, [1, 2], 0, only_recent=True) == {}
    moved = ledger.hand_out(1, [1, 2], 0)
    assert {w.entity for w in moved[2]} == {e for e in clients if owner_of(e, [1, 2]) == 2}
    # a gateway still on the old set reports one of 2's entities here: the quick sweep finds it
    late = next(w.entity for w in moved[2])
    ledger.merge(UsageReport("gw", 2, (UsageDelta(QuotaType.PRODUCE, late, 1.0),)), 0)
    assert [w.entity for w in ledger.hand_out(1, [1, 2], 0, only_recent=True)[2]] == [late]
