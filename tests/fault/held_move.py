"""Partition moves under failure (issue 13, decision 0021), for the fault matrix and the short
variant in `tests/integration/reassignment`: partition 0 of the topic moves off one of its
replicas onto the storage node that holds none of it, and the processes the move needs are
SIGKILLed while the joining replica is still copying.

The copy is held in progress by a follower replication throttle (decision 0024), not by timing:
the joining node gets `follower.replication.throttled.rate` = 1 B/s and the topic lists it in
`follower.replication.throttled.replicas`. It is written before the move starts, so the joiner
(which applies its image in order) is throttled from its first fetch: it copies one fetch per
rate window and, while the workload keeps writing, never reaches the high watermark, so it
cannot join the ISR and the move cannot complete. Lifting the throttle (as `--verify` or a
higher `--throttle` would) lets it catch up; the move then completes by itself.

`HeldMove` names the nodes by role: the `joiner`, the `leaving` replica (the leader or a
follower) and the `target`; with partition 0 on {1,2,3} led by 1, leaving the leader is the
issue's {1,2,3} → {2,3,4}.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checker import check_bytes
from faults import admin, describe, describe_cluster, kill, led_by, restart_all, wait_until
from observers import read_replica_bytes

from riverlog.client import TopicPartition
from riverlog.client.admin import PartitionInfo
from riverlog.cluster import LocalCluster, ManagedProcess
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE
from riverlog.common.replication_throttle import FOLLOWER_THROTTLED_REPLICAS

THROTTLE_BYTES_PER_S = 1  # far below the workload's write rate: the joiner never catches up
MOVE_BOUND_S = 60.0  # a step of the move (started, failed over, completed) happens within this


@dataclass(frozen=True)
class HeldMove:
    """Partition 0 of `topic` moving from `original` to `target`, held mid-copy."""

    topic: str
    original: tuple[int, ...]
    target: tuple[int, ...]
    joiner: int
    leaving: int
    leader: int  # when the move started

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, 0)

    def __str__(self) -> str:
        return (
            f"{self.topic}-0 {list(self.original)} -> {list(self.target)} "
            f"(leader {self.leader}, joining {self.joiner}, leaving {self.leaving})"
        )


def partition(cluster: LocalCluster, topic: str) -> PartitionInfo:
    return describe(cluster, topic).partitions[0]


def moving(cluster: LocalCluster, move: HeldMove) -> bool:
    with admin(cluster) as client:
        return move.tp in client.list_partition_reassignments([move.tp])


def partition_dir(cluster: LocalCluster, node: int, topic: str) -> Path:
    return cluster.data_dir / "data" / f"storage-{node}" / f"{topic}-0"


def log_size(cluster: LocalCluster, node: int, topic: str) -> int:
    try:
        return sum(p.stat().st_size for p in partition_dir(cluster, node, topic).glob("*.log"))
    except FileNotFoundError:
        return 0


def copying(cluster: LocalCluster, move: HeldMove) -> bool:
    """The move is in progress and the joiner holds part of the log, out of the ISR."""
    p = partition(cluster, move.topic)
    return (
        move.joiner in p.replicas
        and move.joiner not in p.isr
        and log_size(cluster, move.joiner, move.topic) > 0
        and moving(cluster, move)
    )


def start_held_move(cluster: LocalCluster, topic: str, leave_leader: bool) -> HeldMove:
    """Throttle the node that holds no replica of partition 0, then move the partition onto it
    off its leader (`leave_leader`) or off a follower; return once the joiner has copied part
    of the log and is still out of the ISR."""
    full = wait_until(lambda: set((p := partition(cluster, topic)).isr) == set(p.replicas), 30)
    assert full, f"{topic}-0 not fully in sync before the move: {partition(cluster, topic)}"
    p = partition(cluster, topic)
    nodes = sorted(proc.node_id or 0 for proc in cluster.by_role("storage"))
    joiner = next(n for n in nodes if n not in p.replicas)
    leaving = p.leader if leave_leader else next(r for r in p.replicas if r != p.leader)
    target = (*(r for r in p.replicas if r != leaving), joiner)
    move = HeldMove(topic, p.replicas, target, joiner, leaving, p.leader)
    with admin(cluster) as client:
        client.alter_node_configs({joiner: {FOLLOWER_THROTTLED_RATE: THROTTLE_BYTES_PER_S}})
        client.alter_configs({topic: {FOLLOWER_THROTTLED_REPLICAS: f"0:{joiner}"}})
        client.alter_partition_reassignments({move.tp: list(target)})
    assert wait_until(lambda: copying(cluster, move), MOVE_BOUND_S), (
        f"{move}: the joiner never held part of the log out of the ISR: "
        f"{partition(cluster, topic)}, {log_size(cluster, joiner, topic)} bytes"
    )
    return move


def lift_throttle(cluster: LocalCluster, move: HeldMove) -> None:
    """Delete the joiner's rate and the topic's list: the copy goes at full speed."""
    with admin(cluster) as client:
        client.alter_node_configs({move.joiner: {FOLLOWER_THROTTLED_RATE: None}})
        client.alter_configs({move.topic: {FOLLOWER_THROTTLED_REPLICAS: None}})


def wait_moved(cluster: LocalCluster, move: HeldMove) -> PartitionInfo:
    """Until the move completed: no longer listed, the replicas are the target, every one in
    sync, led by one of them."""

    def done() -> bool:
        p = partition(cluster, move.topic)
        return (
            p.replicas == move.target
            and set(p.isr) == set(move.target)
            and p.leader in move.target
            and not moving(cluster, move)
        )

    assert wait_until(done, MOVE_BOUND_S, interval=0.5), (
        f"{move} did not complete: {partition(cluster, move.topic)}"
    )
    return partition(cluster, move.topic)


def kill_joiner_and_restart(cluster: LocalCluster, move: HeldMove) -> int:
    """SIGKILL the joiner mid-copy, start it again; it resumes copying (its log grows past what
    it held when killed) and the move is still in progress. Returns the bytes it held."""
    assert copying(cluster, move), f"{move}: not mid-copy: {partition(cluster, move.topic)}"
    proc = cluster.storage(move.joiner)
    held = log_size(cluster, move.joiner, move.topic)
    kill(proc)
    restart_all([proc])
    grown = wait_until(lambda: log_size(cluster, move.joiner, move.topic) > held, MOVE_BOUND_S)
    assert grown, f"{move}: the restarted joiner copies nothing past its {held} bytes"
    assert moving(cluster, move), f"{move}: no longer in progress after the joiner's restart"
    assert move.joiner not in partition(cluster, move.topic).isr
    return held


def kill_leaving_leader(cluster: LocalCluster, move: HeldMove) -> ManagedProcess:
    """SIGKILL the leader, which the move removes: a live target replica leads, under a higher
    leader epoch, and the move is still in progress."""
    before = partition(cluster, move.topic)
    assert before.leader == move.leaving, f"{move}: led by {before.leader}"
    proc = cluster.storage(move.leaving)
    kill(proc)

    def led_by_a_target() -> bool:
        p = partition(cluster, move.topic)
        return p.leader in move.target and p.leader_epoch > before.leader_epoch

    assert wait_until(led_by_a_target, MOVE_BOUND_S), (
        f"{move}: no live target replica leads after the leader died: "
        f"{partition(cluster, move.topic)}"
    )
    assert moving(cluster, move), f"{move}: not in progress after the leader died"
    return proc


def kill_controller(cluster: LocalCluster, move: HeldMove) -> ManagedProcess:
    """SIGKILL the active controller: another metadata instance takes over with a higher
    epoch and reads the move back from etcd (it is still listed)."""
    before = describe_cluster(cluster)
    proc = cluster.metadata(before.controller_id)
    kill(proc)

    def new_controller() -> bool:
        now = describe_cluster(cluster)
        return (
            now.controller_epoch > before.controller_epoch
            and now.controller_id != before.controller_id
        )

    assert wait_until(new_controller, MOVE_BOUND_S), f"no new controller after {before}"
    assert moving(cluster, move), f"{move}: lost when the controller died"
    return proc


def wait_copy_deleted(cluster: LocalCluster, move: HeldMove) -> None:
    """The leaving node (running again) deleted its copy of the partition."""
    gone = wait_until(lambda: not partition_dir(cluster, move.leaving, move.topic).exists(), 30)
    assert gone, f"{move}: node {move.leaving} still holds {move.topic}-0"


def assert_bytes_equal(cluster: LocalCluster, move: HeldMove) -> None:
    """The target replicas' logs are equal byte for byte (the cluster is quiet)."""
    copies = read_replica_bytes(cluster.data_dir, move.topic, 0, move.target)
    compared, problems = check_bytes({0: copies})
    assert compared and not problems, f"{move}: {problems}"


# ---- the steps of the fault matrix (`test_replication_faults.Context` as `ctx`) ------------


def joiner_killed_mid_copy(ctx: Any) -> None:
    """Move partition 0 off a follower; SIGKILL the joining replica mid-copy and restart it."""
    ctx.move = move = start_held_move(ctx.cluster, ctx.topic, leave_leader=False)
    ctx.affected = [0]
    ctx.notes.append(str(move))
    ctx.workload.mark_fault()
    held = kill_joiner_and_restart(ctx.cluster, move)
    ctx.notes.append(f"joiner {move.joiner} killed holding {held} bytes, restarted")


def leaving_leader_killed(ctx: Any) -> None:
    """Move partition 0 off its leader ({1,2,3} -> {2,3,4}); SIGKILL that leader mid-move."""
    ctx.move = move = start_held_move(ctx.cluster, ctx.topic, leave_leader=True)
    ctx.affected = led_by(describe(ctx.cluster, ctx.topic), move.leaving)
    ctx.notes.append(str(move))
    ctx.workload.mark_fault()
    ctx.victims = [kill_leaving_leader(ctx.cluster, move)]
    ctx.notes.append(f"leader {move.leaving} killed: {partition(ctx.cluster, ctx.topic)}")


def controller_joiner_leader_killed(ctx: Any) -> None:
    """Issue 13's run: during one move off the leader, SIGKILL the controller, then the
    joining replica (restarted), then the leaving leader."""
    ctx.move = move = start_held_move(ctx.cluster, ctx.topic, leave_leader=True)
    ctx.affected = [p.partition for p in describe(ctx.cluster, ctx.topic).partitions]
    ctx.notes.append(str(move))
    ctx.workload.mark_fault()
    ctx.victims = [kill_controller(ctx.cluster, move)]
    held = kill_joiner_and_restart(ctx.cluster, move)
    ctx.notes.append(f"controller killed; joiner {move.joiner} killed at {held} bytes")
    ctx.victims.append(kill_leaving_leader(ctx.cluster, move))
    ctx.notes.append(f"leader {move.leaving} killed: {partition(ctx.cluster, ctx.topic)}")


def move_completes(ctx: Any) -> None:
    """Lift the throttle: the move completes while the killed processes are still down; they
    start again and the leaving node deletes its copy."""
    lift_throttle(ctx.cluster, ctx.move)
    done = wait_moved(ctx.cluster, ctx.move)
    ctx.notes.append(f"moved with {[p.name for p in ctx.victims]} down: {done}")
    restart_all(ctx.victims)
    wait_copy_deleted(ctx.cluster, ctx.move)


def target_bytes_equal(ctx: Any) -> None:
    """After the workload: the target replicas' logs are equal byte for byte."""
    assert_bytes_equal(ctx.cluster, ctx.move)
