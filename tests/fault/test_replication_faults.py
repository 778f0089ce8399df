"""The failure matrix of issue 3, after Kafka's `replication_test.py`: one named failure per
case (kill -9, SIGSTOP past the lease then SIGCONT, restart), each on a cluster of its own,
under a bounded acks=all workload on a replication-factor-3 topic with min.insync.replicas=2.

Every case runs the same script: produce (and consume concurrently) for a few seconds, inject
the failure, keep producing, heal, keep producing, stop; wait until the replicas converge; then
`checker.check` asserts that every acknowledged record is readable exactly once, at the offset
it was acknowledged with, in producer order; that no offset holds different records on
different replicas; and that the concurrent consumer never saw a record above the high
watermark or one that was later truncated. Each case prints how many records it checked and
how long the partitions the failure touched had no acknowledged produce.

The reassignment cases (issue 13, `held_move.py`) run on four storage nodes: partition 0
moves onto the fourth while a follower throttle holds the copy, and the joining replica, the
leaving leader, or the controller, the joiner and the leader in turn are SIGKILLed mid-copy;
the throttle is then lifted and the move must complete, the leaving node delete its copy and
the target replicas end byte for byte equal.

The first case (replication factor 1, acks=1: kill -9 the only replica and restart it) proves
the harness on what the single-replica foundation already promises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from checker import check
from faults import (
    PAST_LEASE_S,
    controller,
    describe,
    describe_cluster,
    kill,
    led_by,
    pause_past_lease,
    pause_until,
    restart_all,
    restart_etcd,
    wait_for_full_isr,
    wait_for_leaders,
    wait_until,
)
from held_move import (
    controller_joiner_leader_killed,
    joiner_killed_mid_copy,
    leaving_leader_killed,
    move_completes,
    target_bytes_equal,
)
from observers import HighWatermarkWatcher, read_back, wait_for_convergence
from workload import Workload

from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, RiverlogError

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PARTITIONS = 3
RATE = 400.0  # records/s, all producers together
MAX_RECORDS = 10_000  # per producer (two): 50 s at RATE, longer than any scenario
WARMUP_ACKS = 200  # acknowledged before the failure: the cluster works
BEFORE_FAULT_S = 2.0
AFTER_HEAL_S = 3.0
HEAL_ACKS = 100  # acknowledged after healing, within RECOVERY_S
RECOVERY_S = 45.0


@dataclass
class Context:
    """What a failure needs: the cluster, the topic, the running workload; `affected` is set
    by the failure to the partitions it takes leadership from (or touches)."""

    cluster: LocalCluster
    topic: str
    workload: Workload
    affected: list[int] = field(default_factory=list)
    victims: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)
    unclean: bool = False
    move: Any = None  # held_move.HeldMove, for the reassignment cases


Step = Callable[[Context], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    inject: Step
    heal: Step
    replication_factor: int = 3
    acks: str = "all"
    min_insync: int = 2
    unclean: bool = False
    storage_nodes: int = 3
    metadata_nodes: int = 2
    producer_config: dict = field(default_factory=dict)
    marks: tuple = ()
    after: Step | None = None  # more checks once the checker passed (the cluster is quiet)

    def __str__(self) -> str:
        return self.name

    @property
    def idempotent(self) -> bool:
        """The SDK's default (enable.idempotence) holds only with acks=all: with acks=1 it is
        off, as in Kafka 3, and a retried request may write its records twice."""
        return self.acks == "all" and self.producer_config.get("enable.idempotence", True) in (
            True,
            "true",
        )


# ---- the failures ---------------------------------------------------------------------------


def _leader_victim(ctx: Context) -> None:
    description = describe(ctx.cluster, ctx.topic)
    node = description.partitions[0].leader
    ctx.affected = led_by(description, node)
    ctx.victims = [ctx.cluster.storage(node)]
    ctx.epochs = {p.partition: p.leader_epoch for p in description.partitions}


def _moved(ctx: Context) -> bool:
    now = describe(ctx.cluster, ctx.topic).partitions
    return all(now[p].leader >= 0 and now[p].leader_epoch > ctx.epochs[p] for p in ctx.affected)


def leadership_moved(ctx: Context) -> None:
    """Every partition the failed leader led has a leader again, under a higher leader epoch
    (a resumed zombie cannot have kept its leadership)."""
    ok = wait_until(lambda: _moved(ctx), 30)
    now = describe(ctx.cluster, ctx.topic).partitions
    ctx.notes.append(f"leader epochs {ctx.epochs} -> {[p.leader_epoch for p in now]}")
    assert ok, f"leadership of {ctx.affected} did not move to a new epoch: {ctx.notes}"


def kill_leader(ctx: Context) -> None:
    _leader_victim(ctx)
    ctx.workload.mark_fault()
    kill(ctx.victims[0])


def bounce_leader(rounds: int, sig: str) -> Step:
    """Kafka's clean_bounce / hard_bounce: `rounds` times, stop the current leader of partition
    0 (SIGTERM: controlled shutdown, or SIGKILL), wait for another to lead, start it again."""

    def inject(ctx: Context) -> None:
        _leader_victim(ctx)
        ctx.affected = list(range(PARTITIONS))
        ctx.workload.mark_fault()
        for _ in range(rounds):
            description = describe(ctx.cluster, ctx.topic)
            node = description.partitions[0].leader
            before = description.partitions[0].leader_epoch
            proc = ctx.cluster.storage(node)
            if sig == "term":
                proc.stop()
            else:
                kill(proc)
            moved = wait_until(
                lambda b=before: describe(ctx.cluster, ctx.topic).partitions[0].leader_epoch > b,
                PAST_LEASE_S + 5,
            )
            ctx.notes.append(f"stopped leader {node} (SIG{sig.upper()}): moved {moved}")
            restart_all([proc])
            assert wait_for_full_isr(ctx.cluster, ctx.topic, 30), ctx.notes

    return inject


def kill_follower(ctx: Context) -> None:
    description = describe(ctx.cluster, ctx.topic)
    partition = description.partitions[0]
    node = next(r for r in partition.replicas if r != partition.leader)
    ctx.affected = [p.partition for p in description.partitions if node in p.replicas]
    ctx.victims = [ctx.cluster.storage(node)]
    ctx.workload.mark_fault()
    kill(ctx.victims[0])


def pause_leader(ctx: Context) -> None:
    """SIGSTOP the leader until its lease lapsed and its partitions moved (at most well past
    the lease), then SIGCONT: a zombie leader wakes up replaced."""
    _leader_victim(ctx)
    ctx.workload.mark_fault()
    pause_until(ctx.victims[0], lambda: _moved(ctx), PAST_LEASE_S + 10)


def kill_controller(ctx: Context) -> None:
    before = describe_cluster(ctx.cluster)
    ctx.notes.append(f"controller {before.controller_id} epoch {before.controller_epoch}")
    ctx.affected = list(range(PARTITIONS))
    ctx.victims = [controller(ctx.cluster)]
    ctx.workload.mark_fault()
    kill(ctx.victims[0])


def pause_controller(ctx: Context) -> None:
    before = describe_cluster(ctx.cluster)
    ctx.notes.append(f"controller {before.controller_id} epoch {before.controller_epoch}")
    ctx.affected = list(range(PARTITIONS))
    ctx.victims = [controller(ctx.cluster)]
    ctx.workload.mark_fault()
    # A fixed pause here, not pause_until: with the controller stopped, a DescribeCluster
    # polled through the gateway may wait out its timeout on the paused instance.
    pause_past_lease(ctx.victims[0])


def kill_all_replicas(ctx: Context) -> None:
    description = describe(ctx.cluster, ctx.topic)
    ctx.affected = list(range(PARTITIONS))
    nodes = sorted(set(description.partitions[0].replicas))
    ctx.victims = [ctx.cluster.storage(n) for n in nodes]
    ctx.workload.mark_fault()
    for proc in ctx.victims:
        kill(proc)
    wait_offline(ctx)  # the controller sees every replica gone: partitions offline


def wait_offline(ctx: Context) -> None:
    """Until the controller has taken every partition offline (its last replica's lease
    lapsed), rather than a fixed sleep past the lease."""
    offline = wait_until(
        lambda: all(p.leader == -1 for p in describe(ctx.cluster, ctx.topic).partitions),
        PAST_LEASE_S + 5,
    )
    assert offline, f"partitions not offline {PAST_LEASE_S + 5} s after their replicas died"


def wait_out_of_isr(ctx: Context, node: int, partitions: list[int]) -> None:
    """Until `node` has left the ISR of `partitions` (its lag or lease lapsed), rather than a
    fixed sleep past the lease."""

    def left() -> bool:
        now = describe(ctx.cluster, ctx.topic).partitions
        return all(node not in now[p].isr for p in partitions)

    assert wait_until(left, PAST_LEASE_S + 5), f"node {node} still in the ISR of {partitions}"


def kill_replicas_one_by_one(ctx: Context) -> None:
    """Partition 0's replicas die one at a time, so its ISR shrinks to the leader alone: first
    a follower (the ISR drops it), then the other follower (writes stop: min.insync.replicas),
    then the leader. The first follower to die is the most out of date."""
    description = describe(ctx.cluster, ctx.topic)
    partition = description.partitions[0]
    stale, second = (r for r in partition.replicas if r != partition.leader)
    ctx.victims = [ctx.cluster.storage(n) for n in (stale, second, partition.leader)]
    ctx.affected = list(range(PARTITIONS))
    for i, proc in enumerate(ctx.victims):
        if i == 1:
            ctx.workload.mark_fault()  # from here the ISR is too small for acks=all writes
        kill(proc)
        if i < 2:
            wait_out_of_isr(ctx, proc.node_id, [0])
        else:
            wait_offline(ctx)
        if i == 0:  # records acknowledged without the stale replica: it is out of date
            assert ctx.workload.wait_for_acks(100, 30, since=time.monotonic()), ctx.notes
    ctx.notes.append(f"killed {stale}, {second}, then leader {partition.leader}")


def restart_stale_first(ctx: Context) -> None:
    """Restart the two followers first (out of sync): without unclean election partition 0 must
    stay offline until its last ISR member, the old leader, is back; with it the stale replica
    leads at once and the others truncate to it."""
    stale, second, leader = ctx.victims
    restart_all([stale])
    elected = wait_until(
        lambda: describe(ctx.cluster, ctx.topic).partitions[0].leader >= 0, PAST_LEASE_S + 5
    )
    state = describe(ctx.cluster, ctx.topic).partitions[0]
    ctx.notes.append(f"stale replica back: p0 leader {state.leader} isr {state.isr}")
    restart_all([second])
    if ctx.unclean:
        assert elected and state.leader == stale.node_id, ctx.notes
    else:
        time.sleep(2.0)
        state = describe(ctx.cluster, ctx.topic).partitions[0]
        ctx.notes.append(f"both followers back: p0 leader {state.leader} isr {state.isr}")
        assert not elected and state.leader == -1, f"an out-of-sync replica led: {ctx.notes}"
    restart_all([leader])


def kill_etcd(ctx: Context) -> None:
    ctx.affected = list(range(PARTITIONS))
    ctx.workload.mark_fault()
    restart_etcd(ctx.cluster)


def restart_victims(ctx: Context) -> None:
    restart_all(ctx.victims)


def dwell_then_restart(ctx: Context) -> None:
    """The victim stays dead until the cluster has acted on it (leadership moved off a killed
    leader, a killed follower out of the ISR), then restarts."""
    if ctx.epochs:
        leadership_moved(ctx)
    else:
        for proc in ctx.victims:
            wait_out_of_isr(ctx, proc.node_id, ctx.affected)
    restart_all(ctx.victims)


def already_healed(ctx: Context) -> None:
    """The failure restarted what it stopped."""


def metadata_writable(ctx: Context) -> None:
    """After etcd came back: the controller can write again (a topic can be created)."""
    name = f"{ctx.topic}-after"

    def created() -> bool:
        try:
            ctx.cluster.create_topic(name, 1, 3, timeout=5)
        except RiverlogError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        return describe(ctx.cluster, name).partitions[0].leader >= 0

    ok = wait_until(created, 30, interval=0.5)
    assert ok, "no topic could be created within 30 s of etcd's restart"


def controller_moved(ctx: Context) -> None:
    """After a controller failure: another instance leads with a higher epoch (once the old
    one's lease lapsed), and at most one instance says it is the controller (a resumed one must
    not think it still is)."""
    old_epoch = int(ctx.notes[0].rsplit(" ", 1)[1])
    moved = wait_until(lambda: describe_cluster(ctx.cluster).controller_epoch > old_epoch, 30)
    now = describe_cluster(ctx.cluster)
    ctx.notes.append(f"now controller {now.controller_id} epoch {now.controller_epoch}")
    assert moved, f"no controller with an epoch above {old_epoch} 30 s later: {ctx.notes}"
    assert wait_for_leaders(ctx.cluster, ctx.topic, 30)
    claiming = [m for m in now.metadata_instances if m[3]]
    assert len(claiming) <= 1, f"two metadata instances claim the controller: {claiming}"


def kill_controller_heal(ctx: Context) -> None:
    controller_moved(ctx)
    restart_all(ctx.victims)


def short_restart(ctx: Context) -> None:
    time.sleep(1.0)
    restart_all(ctx.victims)


SCENARIOS = [
    # The harness on what the foundation promises: acks=1 and one request in flight. (With
    # acks=1 the SDK turns idempotence off, as Kafka 3 does, so with 5 in flight a batch the
    # gateway retries may overtake the next one: Kafka allows that reordering too.)
    Scenario(
        "kill-only-replica-rf1-acks1",
        kill_leader,
        short_restart,
        replication_factor=1,
        acks="1",
        min_insync=1,
        metadata_nodes=1,
        producer_config={"max.in.flight.requests.per.connection": 1},
    ),
    # acks=all: the idempotent producer (on by default) keeps order with 5 in flight, and the
    # restarted replica must rebuild its producer state from the log after kill -9.
    Scenario(
        "kill-only-replica-rf1-idempotent",
        kill_leader,
        short_restart,
        replication_factor=1,
        min_insync=1,
        metadata_nodes=1,
    ),
    Scenario("kill-leader", kill_leader, dwell_then_restart),
    Scenario("kill-follower", kill_follower, dwell_then_restart),
    Scenario("hard-bounce-leader-x3", bounce_leader(3, "kill"), already_healed),
    # The longest cases run with `make faults` only (marker long_fault), to keep `make test`
    # in its 30-minute budget: their mechanisms are covered by the cases next to them.
    Scenario(
        "clean-bounce-leader-x3",
        bounce_leader(3, "term"),
        already_healed,
        marks=(pytest.mark.long_fault,),
    ),
    Scenario("kill-controller", kill_controller, kill_controller_heal),
    # The pause-leader cases (and kill-all-replicas-clean, less often) failed intermittently on
    # two real bugs, so they are not xfail (see the fault-test report of issue 3): the gateway
    # closes the channel of a storage node whose lease lapsed, which cancels the produce calls
    # in flight to it without answering the client (it waits for request.timeout.ms); and the
    # SDK kept sending a partition's later batches while an earlier one was unresolved, then,
    # told its sequence "already passed", resent it under a bumped epoch: written twice, and
    # out of order (fixed: at most a window of batches from the oldest unresolved one, and a
    # batch that may have been written is never resent under a new epoch; decision 0006).
    Scenario("pause-leader", pause_leader, leadership_moved),
    # The same with Kafka's default request.timeout.ms (30 s, longer than the pause): the old
    # leader answers once resumed, yet the partition is unavailable for the whole 30 s while
    # the gateway's cancelled calls leave the SDK's requests unanswered.
    Scenario(
        "pause-leader-30s-request-timeout",
        pause_leader,
        leadership_moved,
        producer_config={"request.timeout.ms": 30_000},
        marks=(pytest.mark.long_fault,),
    ),
    Scenario("pause-controller", pause_controller, controller_moved),
    Scenario("kill-all-replicas-at-once", kill_all_replicas, restart_victims),
    Scenario("kill-all-replicas-clean", kill_replicas_one_by_one, restart_stale_first),
    Scenario(
        "kill-all-replicas-unclean",
        kill_replicas_one_by_one,
        restart_stale_first,
        unclean=True,
        marks=(pytest.mark.long_fault,),
    ),
    Scenario("restart-etcd", kill_etcd, metadata_writable),
    # Partition moves (issue 13): the short variant of the first runs in make test, in
    # tests/integration/reassignment/test_reassignment_faults.py.
    Scenario(
        "reassign-joiner-killed-mid-copy",
        joiner_killed_mid_copy,
        move_completes,
        storage_nodes=4,
        after=target_bytes_equal,
        marks=(pytest.mark.long_fault,),
    ),
    Scenario(
        "reassign-leaving-leader-killed",
        leaving_leader_killed,
        move_completes,
        storage_nodes=4,
        after=target_bytes_equal,
        marks=(pytest.mark.long_fault,),
    ),
    Scenario(
        "reassign-controller-joiner-leader-killed",
        controller_joiner_leader_killed,
        move_completes,
        storage_nodes=4,
        after=target_bytes_equal,
        marks=(pytest.mark.long_fault,),
    ),
]


# ---- the script every case runs -------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.name, marks=s.marks) for s in SCENARIOS])
def test_acknowledged_records_survive(
    scenario: Scenario, start_cluster, record_property, fault_summary, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="riverlog.client.producer")
    cluster = start_cluster(
        storage_nodes=scenario.storage_nodes, metadata_nodes=scenario.metadata_nodes
    )
    topic = f"fault-{scenario.name}"
    configs = {"min.insync.replicas": str(scenario.min_insync)}
    if scenario.unclean:
        configs["unclean.leader.election.enable"] = "true"
    cluster.create_topic(topic, PARTITIONS, scenario.replication_factor, configs)
    bootstrap = cluster.bootstrap_servers
    producer_config = {"acks": scenario.acks, **scenario.producer_config}
    workload = Workload(
        bootstrap,
        topic,
        PARTITIONS,
        rate=RATE,
        max_records=MAX_RECORDS,
        producer_config=producer_config,
    )
    ctx = Context(cluster, topic, workload, unclean=scenario.unclean)
    watcher = HighWatermarkWatcher(bootstrap, topic, PARTITIONS).start()
    try:
        workload.start()
        assert workload.wait_for_acks(WARMUP_ACKS, 30), f"no produce before the fault: {ctx}"
        time.sleep(BEFORE_FAULT_S)
        scenario.inject(ctx)
        scenario.heal(ctx)
        healed_at = time.monotonic()
        recovered = workload.wait_for_acks(HEAL_ACKS, RECOVERY_S, since=healed_at)
        time.sleep(AFTER_HEAL_S)
    finally:
        workload.stop()
        watcher.stop()
    if not recovered:
        print(f"\n{scenario}: sent {workload.sent}, acked {len(workload.acks)}, "
              f"failures {dict(workload.failures)}; notes {ctx.notes}")  # fmt: skip
        print(f"  topic: {describe(cluster, topic)}\n  cluster: {describe_cluster(cluster)}")
        for line in caplog.messages[-20:]:
            print(f"  sdk: {line}")
    assert recovered, f"{scenario}: no acknowledged produce {RECOVERY_S} s after healing"
    full = scenario.replication_factor == 1 or wait_for_full_isr(cluster, topic, 30)
    description = describe(cluster, topic)
    replicas = {p.partition: p.replicas for p in description.partitions}
    read = read_back(bootstrap, topic, PARTITIONS)
    logs = wait_for_convergence(cluster.data_dir, topic, PARTITIONS, replicas, timeout=20)
    report = check(
        workload,
        read,
        logs,
        watcher,
        affected=ctx.affected,
        allow_loss=scenario.unclean,
        allow_duplicates=not scenario.idempotent,
    )
    summary = report.summary(scenario.name)
    print(f"\n{summary}")
    print(f"  sent {workload.sent}, failures {dict(workload.failures)}")
    print(f"  watcher fetches {watcher.fetches}, errors {dict(watcher.errors)}")
    print(f"  notes {ctx.notes}; full ISR again: {full}; lost (unclean) {len(report.lost)}")
    for problem in report.problems:
        print(f"  {problem}")
    if report.problems:  # what the producers decided (epoch bumps, retries) explains most
        for line in caplog.messages:
            if "epoch" in line or "retry" in line:
                print(f"  sdk: {line}")
    record_property("summary", summary)
    fault_summary(summary if not report.problems else f"{summary} FAILED")
    assert not report.problems, "\n".join([summary, *report.problems])
    assert full, f"{scenario}: the ISR did not grow back to every replica: {description}"
    if scenario.after is not None:
        scenario.after(ctx)
