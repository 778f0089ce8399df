"""The controller's plan for `__consumer_offsets` ownership: even spread, owners keep what they
can, every move bumps the partition's coordinator epoch (the zombie fence)."""

from collections import Counter

from riverlog.common.cluster.image import CoordinatorAssignment as CA
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller.coordinators import (
    offsets_topic_configs,
    plan_assignment,
)
from riverlog.services.metadata.controller.topics import NewTopic, with_internal_defaults


def apply(current: dict[int, CA], changes: list[CA]) -> dict[int, CA]:
    return {**current, **{c.partition: c for c in changes}}


def test_first_assignment_spreads_evenly_at_epoch_one() -> None:
    changes = plan_assignment(50, {}, [1, 2])
    assert len(changes) == 50
    assert Counter(c.coordinator_id for c in changes) == {1: 25, 2: 25}
    assert {c.epoch for c in changes} == {1}


def test_lapsed_owner_partitions_move_with_a_higher_epoch() -> None:
    state = apply({}, plan_assignment(10, {}, [1, 2]))
    lost = {p for p, a in state.items() if a.coordinator_id == 2}
    changes = plan_assignment(10, state, [1])
    assert {c.partition for c in changes} == lost
    assert all(c.coordinator_id == 1 and c.epoch == 2 for c in changes)
    assert plan_assignment(10, apply(state, changes), [1]) == []


def test_a_new_instance_takes_a_fair_share_and_others_keep_theirs() -> None:
    state = apply({}, plan_assignment(12, {}, [1]))
    changes = plan_assignment(12, state, [1, 2, 3])
    after = apply(state, changes)
    assert Counter(a.coordinator_id for a in after.values()) == {1: 4, 2: 4, 3: 4}
    assert all(state[c.partition].epoch + 1 == c.epoch for c in changes)
    assert len(changes) == 8


def test_no_live_coordinator_leaves_partitions_ownerless() -> None:
    state = apply({}, plan_assignment(3, {}, [7]))
    changes = plan_assignment(3, state, [])
    assert [(c.coordinator_id, c.epoch) for c in changes] == [(-1, 2)] * 3
    again = plan_assignment(3, apply(state, changes), [8])
    assert [(c.coordinator_id, c.epoch) for c in again] == [(8, 3)] * 3


def test_offsets_topic_configs() -> None:
    assert dict(offsets_topic_configs(3))["min.insync.replicas"] == "2"
    assert dict(offsets_topic_configs(1))["min.insync.replicas"] == "1"
    assert dict(offsets_topic_configs(3))["cleanup.policy"] == "compact"


def test_a_restarted_owner_keeps_its_partitions_under_a_new_epoch() -> None:
    state = apply({}, plan_assignment(4, {}, {1: 100, 2: 200}))
    assert {a.incarnation for a in state.values() if a.coordinator_id == 1} == {100}
    changes = plan_assignment(4, state, {1: 101, 2: 200})
    assert {c.partition for c in changes} == {p for p, a in state.items() if a.coordinator_id == 1}
    assert all(c.coordinator_id == 1 and c.incarnation == 101 for c in changes)
    assert all(c.epoch == state[c.partition].epoch + 1 for c in changes)
    assert plan_assignment(4, apply(state, changes), {1: 101, 2: 200}) == []


def test_the_transaction_state_topic_gets_kafkas_settings_capped_at_the_nodes() -> None:
    config = MetadataConfig(instance_id=1)
    full = with_internal_defaults(NewTopic("__transaction_state"), config, 5)
    assert (full.num_partitions, full.replication_factor) == (50, 3)
    assert dict(full.configs) == {
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "retention.ms": "-1",
    }
    small = with_internal_defaults(NewTopic("__transaction_state"), config, 1)
    assert small.replication_factor == 1 and dict(small.configs)["min.insync.replicas"] == "1"
    user = NewTopic("orders", 3, 2)
    assert with_internal_defaults(user, config, 5) is user
