"""GrantKeeper (decision 0047): the non-blocking grant keeper the direct consumer and producer
share. A fake GrantDataAccess (futures answered by the test) and a fake clock: lookup never
waits (PENDING while a grant is on its way, on_ready when it comes), the next grant is kept
aside until the current one is spent or near expiry, throttle time, lifetime_ms, refusals."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from riverlog.client._grants import PENDING, DataGrant, GrantKeeper, GrantSettings
from riverlog.common.errors import ErrorCode
from riverlog.v1 import gateway_pb2

pytestmark = pytest.mark.timeout(10)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Gateway:
    """GrantDataAccess calls the test answers."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, frozenset[str], Future[gateway_pb2.GrantDataAccessResponse]]]
        self.asked = []

    def __call__(
        self, node_id: int, topics: frozenset[str]
    ) -> Future[gateway_pb2.GrantDataAccessResponse]:
        future: Future[gateway_pb2.GrantDataAccessResponse] = Future()
        self.asked.append((node_id, topics, future))
        return future

    def answer(self, index: int = -1, **fields: object) -> None:
        values: dict[str, object] = {
            "grant": b"token%d" % len(self.asked),
            "byte_budget": 1000,
            "lifetime_ms": 60_000,
            "expires_at_ms": 1,  # a wall clock far off: lifetime_ms wins
            "host": "127.0.0.1",
            "direct_port": 9,
        }
        values.update(fields)
        self.asked[index][2].set_result(gateway_pb2.GrantDataAccessResponse(**values))  # type: ignore[arg-type]


def make(**settings: object) -> tuple[GrantKeeper, Gateway, Clock, list[int]]:
    gateway, clock, ready = Gateway(), Clock(), []
    keeper = GrantKeeper(
        gateway,
        GrantSettings(**settings),  # type: ignore[arg-type]
        on_ready=lambda: ready.append(1),
        clock=clock,
        wall_clock=lambda: 2e9,
    )
    return keeper, gateway, clock, ready


def granted(keeper: GrantKeeper, node: int = 1, topics: tuple[str, ...] = ("t",)) -> DataGrant:
    grant = keeper.lookup(node, topics)
    assert isinstance(grant, DataGrant), grant
    return grant


def test_lookup_never_waits_pending_then_the_grant_and_on_ready() -> None:
    keeper, gateway, _, ready = make()
    assert keeper.lookup(1, ["t"]) is PENDING
    assert keeper.lookup(1, ["t"]) is PENDING  # one call on its way, not two
    assert len(gateway.asked) == 1 and gateway.asked[0][:2] == (1, frozenset({"t"}))
    gateway.answer()
    assert ready == [1]
    grant = granted(keeper)
    assert grant.token == b"token1" and grant.port == 9 and keeper.granted == 1


def test_usable_at_is_the_throttle_time_and_lifetime_is_relative() -> None:
    keeper, gateway, clock, _ = make(expiry_slack_s=1.0)
    keeper.lookup(1, ["t"])
    gateway.answer(throttle_time_ms=2500)
    grant = granted(keeper)
    assert grant.usable_at == clock.now + 2.5
    assert grant.usable_until == clock.now + 59.0  # lifetime_ms less the slack, not the wall


def test_an_older_gateway_without_lifetime_uses_expires_at() -> None:
    keeper, gateway, clock, _ = make(expiry_slack_s=1.0)
    keeper.lookup(1, ["t"])
    gateway.answer(lifetime_ms=0, expires_at_ms=int(2e12) + 30_000)
    assert granted(keeper).usable_until == clock.now + 29.0


def test_the_next_grant_waits_until_the_current_one_is_spent() -> None:
    keeper, gateway, _, _ = make(renew_fraction=0.5)
    keeper.lookup(1, ["t"])
    gateway.answer()
    first = granted(keeper)
    keeper.spend(1, first.serial, 499)
    assert granted(keeper) == first and len(gateway.asked) == 1
    keeper.spend(1, first.serial, 1)  # half used: the next one is asked
    assert granted(keeper) == first and len(gateway.asked) == 2
    gateway.answer()
    assert granted(keeper) == first  # kept aside: the rest of the first one is used
    keeper.spend(1, first.serial, 500)
    second = granted(keeper)
    assert second.serial != first.serial and second.token == b"token2"
    assert keeper.renewed == 1


def test_an_expired_answer_switches_to_the_next_or_asks() -> None:
    keeper, gateway, _, _ = make()
    keeper.lookup(1, ["t"])
    gateway.answer()
    first = granted(keeper)
    keeper.expired(1, first.serial)
    assert keeper.lookup(1, ["t"]) is PENDING  # none aside: asked anew
    gateway.answer()
    second = granted(keeper)
    keeper.expired(1, first.serial)  # a late answer under the old grant changes nothing
    assert granted(keeper) == second


def test_near_expiry_the_next_one_is_taken_and_renewal_at_the_fraction_of_life() -> None:
    keeper, gateway, clock, _ = make(renew_fraction=0.5, expiry_slack_s=1.0)
    keeper.lookup(1, ["t"])
    gateway.answer(lifetime_ms=10_000)
    first = granted(keeper)
    clock.now += 5.0
    assert granted(keeper) == first and len(gateway.asked) == 2  # half its life: renew
    gateway.answer(lifetime_ms=10_000)
    assert granted(keeper) == first
    clock.now += 4.0  # within the slack of its expiry
    assert granted(keeper).token == b"token2"


def test_a_new_topic_asks_for_all_and_the_covering_grant_is_taken_at_once() -> None:
    keeper, gateway, _, _ = make()
    keeper.lookup(1, ["a"])
    gateway.answer()
    granted(keeper, topics=("a",))
    assert keeper.lookup(1, ["b"]) is PENDING
    assert gateway.asked[-1][1] == frozenset({"a", "b"})
    assert granted(keeper, topics=("a",)).topics == frozenset({"a"})  # still serves a
    gateway.answer()
    assert granted(keeper, topics=("b",)).topics == frozenset({"a", "b"})


def test_a_topic_refused_goes_to_the_gateway_the_others_keep_their_grant() -> None:
    keeper, gateway, clock, _ = make(fallback_s=300.0)
    keeper.lookup(1, ["a"])
    gateway.answer()
    granted(keeper, topics=("a",))
    keeper.lookup(1, ["b"])
    gateway.answer(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, grant=b"")
    assert keeper.lookup(1, ["b"]) is None
    assert granted(keeper, topics=("a",)).topics == frozenset({"a"})
    assert len(gateway.asked) == 2
    clock.now += 301
    assert keeper.lookup(1, ["b"]) is PENDING  # asked again after metadata.max.age.ms


def test_disabled_cluster_and_no_direct_port_use_the_gateway_for_a_while() -> None:
    keeper, gateway, clock, _ = make(fallback_s=300.0)
    keeper.lookup(1, ["t"])
    gateway.answer(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, grant=b"")
    assert keeper.lookup(1, ["t"]) is None and keeper.lookup(2, ["t"]) is None
    assert len(gateway.asked) == 1
    clock.now += 301
    assert keeper.lookup(2, ["t"]) is PENDING
    gateway.answer(direct_port=0)
    assert keeper.lookup(2, ["t"]) is None and keeper.lookup(1, ["t"]) is PENDING


def test_throttled_without_a_grant_gateway_until_the_throttle_passed() -> None:
    keeper, gateway, clock, _ = make()
    keeper.lookup(1, ["t"])
    gateway.answer(grant=b"", byte_budget=0, throttle_time_ms=3000)
    assert keeper.lookup(1, ["t"]) is None and len(gateway.asked) == 1
    clock.now += 3.0
    assert keeper.lookup(1, ["t"]) is PENDING


def test_throttled_renewal_keeps_the_current_grant() -> None:
    keeper, gateway, clock, _ = make()
    keeper.lookup(1, ["t"])
    gateway.answer()
    first = granted(keeper)
    keeper.spend(1, first.serial, 600)
    granted(keeper)
    gateway.answer(grant=b"", byte_budget=0, throttle_time_ms=3000)
    assert granted(keeper) == first and len(gateway.asked) == 2  # no new ask before 3 s
    clock.now += 3.0
    assert granted(keeper) == first and len(gateway.asked) == 3


def test_a_budget_below_the_minimum_uses_the_gateway_until_it_would_have_expired() -> None:
    keeper, gateway, clock, _ = make(min_budget=5000)
    keeper.lookup(1, ["t"])
    gateway.answer(byte_budget=1000, lifetime_ms=20_000)
    assert keeper.lookup(1, ["t"]) is None
    clock.now += 20.0
    assert keeper.lookup(1, ["t"]) is PENDING


def test_a_failed_call_backs_off_doubling_and_unreachable_falls_back() -> None:
    keeper, gateway, clock, _ = make(backoff_s=0.1, backoff_max_s=0.3, fallback_s=300.0)
    for backoff in (0.1, 0.2, 0.3, 0.3):
        assert keeper.lookup(1, ["t"]) is PENDING
        gateway.asked[-1][2].set_exception(RuntimeError("unavailable"))
        assert keeper.lookup(1, ["t"]) is None
        clock.now += backoff
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer()
    granted(keeper)
    keeper.unreachable(1)
    assert keeper.lookup(1, ["t"]) is None and not keeper.direct(1, clock.now)
    clock.now += 300
    assert keeper.lookup(1, ["t"]) is PENDING


def test_an_ask_that_cannot_be_sent_is_the_gateway() -> None:
    clock = Clock()

    def broken(node_id: int, topics: frozenset[str]) -> Future[object]:
        raise RuntimeError("closed")

    keeper = GrantKeeper(broken, GrantSettings(), clock=clock)
    assert keeper.lookup(1, ["t"]) is None


def test_close_cancels_the_call_on_its_way() -> None:
    keeper, gateway, _, _ = make()
    keeper.lookup(1, ["t"])
    keeper.close()
    assert gateway.asked[0][2].cancelled()


def test_without_collect_in_lookup_an_answer_waits_for_collect() -> None:
    keeper, gateway, clock, _ = make(collect_in_lookup=False)
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer()
    assert keeper.lookup(1, ["t"]) is PENDING  # one drain sees one state
    keeper.collect(clock.now)
    assert isinstance(keeper.lookup(1, ["t"]), DataGrant)


def test_a_reserve_takes_the_next_grant_while_the_largest_frame_still_fits() -> None:
    keeper, gateway, _, _ = make(reserve_bytes=300, renew_fraction=0.9)
    keeper.lookup(1, ["t"])
    gateway.answer()
    first = granted(keeper)
    keeper.spend(1, first.serial, 450)  # 550 left: under twice the reserve, the next is asked
    assert granted(keeper) == first and len(gateway.asked) == 2
    gateway.answer()
    keeper.spend(1, first.serial, 300)  # 250 left: the largest frame would not fit
    assert granted(keeper).token == b"token2"


def test_a_short_lifetime_keeps_a_tenth_as_slack_and_is_used() -> None:
    # A 1 s grant with the default 1 s slack was past usable_until on arrival (review 0047).
    keeper, gateway, clock, _ = make(collect_in_lookup=False)
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer(lifetime_ms=1000)
    keeper.collect()
    grant = granted(keeper)
    assert grant.usable_until == pytest.approx(clock.now + 0.9)
    assert len(gateway.asked) == 1


def test_a_grant_unusable_on_arrival_sends_the_node_to_the_gateway_not_asking_again() -> None:
    keeper, gateway, clock, _ = make(collect_in_lookup=False, backoff_max_s=2.0)
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer(lifetime_ms=1000)
    clock.now += 1.5  # collected after its life had passed
    keeper.collect()
    for _ in range(3):
        assert keeper.lookup(1, ["t"]) is None
    assert len(gateway.asked) == 1
    clock.now += 2.0  # backoff_max_s later: asked again
    assert keeper.lookup(1, ["t"]) is PENDING and len(gateway.asked) == 2


def test_a_fresh_grant_refused_as_expired_on_its_grant_frame_goes_to_the_gateway() -> None:
    # The node's clock ahead by more than the grant's life: asking again would loop.
    keeper, gateway, clock, _ = make(collect_in_lookup=False, fallback_s=300.0)
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer()
    keeper.collect()
    grant = granted(keeper)
    keeper.expired(1, grant.serial, grant_frame=True)
    assert keeper.lookup(1, ["t"]) is None and len(gateway.asked) == 1
    assert not keeper.direct(1, clock.now)
    clock.now += 300.0
    assert keeper.lookup(1, ["t"]) is PENDING


def test_a_spent_grant_refused_on_its_grant_frame_is_renewed() -> None:
    keeper, gateway, _, _ = make(collect_in_lookup=False)
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer()
    keeper.collect()
    grant = granted(keeper)
    keeper.spend(1, grant.serial, 10)
    keeper.expired(1, grant.serial, grant_frame=True)  # another connection spent it
    assert keeper.lookup(1, ["t"]) is PENDING and len(gateway.asked) == 2


def test_a_grant_life_counts_from_its_ask_not_its_collection() -> None:
    # A consumer polling rarely collects the answer late: the node's count began at the ask.
    keeper, gateway, clock, _ = make()
    asked = clock.now
    assert keeper.lookup(1, ["t"]) is PENDING
    gateway.answer(lifetime_ms=60_000)
    clock.now = asked + 30
    grant = granted(keeper)
    assert grant.usable_until == pytest.approx(asked + 59)
    assert grant.renew_at == pytest.approx(asked + 30)
    clock.now = asked + 70
    assert keeper.lookup(1, ["t"]) is PENDING  # expired: a new one asked
