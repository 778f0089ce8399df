"""Regression (found by the fuzzer, tests/integration/fuzz): a produce whose partition carried
a current_leader_epoch newer than any the cluster had got UNKNOWN_LEADER_EPOCH from the leader,
and the router re-routed it until the request deadline (request.timeout.ms, 30 s), so the
client's call (or a stream's in-flight slot) hung that long for an answer it could have had at
once. Now such an item is answered at once; an item the leader merely lags behind (its epoch
is the one the gateway routed by) is still retried."""

from gateway_fakes import Harness

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.produce import ProducePart, ProducePartResult

T0 = TopicPartition("t", 0)  # led by node 1 at leader epoch 1 in the harness image


def _unknown_epoch(harness: Harness) -> None:
    harness.storage.answer = lambda node_id, item: ProducePartResult(
        item.tp, ErrorCode.UNKNOWN_LEADER_EPOCH, "leader epoch is newer than known here"
    )


async def test_an_epoch_from_the_future_is_answered_at_once(harness: Harness) -> None:
    _unknown_epoch(harness)
    ctx = harness.ctx(5.0)
    results = await harness.router.dispatch(
        [ProducePart(T0, b"batch", current_leader_epoch=9)],
        harness.send,
        ProducePartResult.failed,
        ctx.deadline,
    )
    assert results[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert len(harness.storage.calls) == 1
    assert ctx.deadline.remaining() > 4.0  # answered, not timed out


async def test_a_leader_behind_the_routed_epoch_is_still_retried(harness: Harness) -> None:
    _unknown_epoch(harness)
    results = await harness.router.dispatch(
        [ProducePart(T0, b"batch", current_leader_epoch=1)],
        harness.send,
        ProducePartResult.failed,
        harness.ctx(0.3).deadline,
    )
    assert results[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert len(harness.storage.calls) >= 2
