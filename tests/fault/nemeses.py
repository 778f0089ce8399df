"""The nemeses of the network fault tests (issue 12), each a small named function pair: `inject`
breaks something while the workload runs (and waits, bounded, for what the fault must cause,
e.g. leadership moving away from a cut-off leader), `heal` undoes it. Crossed with the
workload scenarios by parametrize in `test_network_faults.py`.

They find their victims by role at the moment of the fault (the leader of partition 0, the
active controller, ...) and name processes as the launcher does (`storage-2`, `metadata-1`,
`etcd`, `gateway-1`). Addresses, rules and helpers are `net.Network`'s; clocks `clock.Clocks`;
log dirs `disk.SmallDisks`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from faults import PAST_LEASE_S, controller, describe, describe_cluster, led_by, wait_until
from net import CLIENTS
from workload import Workload

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import common_pb2, data_pb2, storage_pb2_grpc

MOVE_BOUND_S = 30.0  # a fault that must move leadership does so within this
CLOCK_JUMP_S = 600  # ±10 minutes
DWELL_S = PAST_LEASE_S + 2.0  # how long a fault that need not move anything stays


@dataclass
class Ctx:
    """What a nemesis needs, and what it leaves for the checks."""

    nc: Any  # conftest.NetCluster
    topic: str
    partitions: int
    workload: Workload
    affected: list[int] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)  # outcomes of writes to an isolated leader
    probe_acked: int = 0

    @property
    def net(self):
        return self.nc.net

    @property
    def cluster(self):
        return self.nc.cluster

    def names(self, role: str) -> list[str]:
        return [p.name for p in self.cluster.by_role(role)]


Step = Callable[[Ctx], None]


@dataclass(frozen=True)
class Nemesis:
    name: str
    inject: Step
    heal: Step
    storage_nodes: int = 3
    replication_factor: int = 3
    min_insync: int = 2
    clocks: bool = False
    disk_mb: int | None = None
    ci: bool = False  # in the fast subset `make test` runs; the rest is `long_fault`

    def __str__(self) -> str:
        return self.name


# ---- finding victims, waiting for effects ---------------------------------------------------


def leader_victim(ctx: Ctx) -> str:
    """The leader of partition 0 (noted with every partition's epoch, and the partitions it
    leads as `affected`)."""
    description = describe(ctx.cluster, ctx.topic)
    node = description.partitions[0].leader
    ctx.affected = led_by(description, node)
    ctx.epochs = {p.partition: p.leader_epoch for p in description.partitions}
    name = f"storage-{node}"
    ctx.victims = [name]
    return name


def follower_victim(ctx: Ctx) -> str:
    description = describe(ctx.cluster, ctx.topic)
    p0 = description.partitions[0]
    node = next(r for r in p0.replicas if r != p0.leader)
    ctx.affected = [p.partition for p in description.partitions if node in p.replicas]
    name = f"storage-{node}"
    ctx.victims = [name]
    return name


def controller_victim(ctx: Ctx) -> str:
    before = describe_cluster(ctx.cluster)
    ctx.notes.append(f"controller {before.controller_id} epoch {before.controller_epoch}")
    ctx.epochs = {-1: before.controller_epoch}
    ctx.affected = list(range(ctx.partitions))
    name = controller(ctx.cluster).name
    ctx.victims = [name]
    return name


def wait_leadership_moved(ctx: Ctx) -> None:
    """Every partition the victim led has another leader under a higher epoch (bounded)."""
    node = int(ctx.victims[0].rsplit("-", 1)[1])

    def moved() -> bool:
        now = describe(ctx.cluster, ctx.topic).partitions
        return all(
            now[p].leader not in (-1, node) and now[p].leader_epoch > ctx.epochs[p]
            for p in ctx.affected
        )

    ok = wait_until(moved, MOVE_BOUND_S)
    now = describe(ctx.cluster, ctx.topic).partitions
    ctx.notes.append(f"leaders {[(p.leader, p.leader_epoch) for p in now]}")
    assert ok, f"leadership of {ctx.affected} did not leave {ctx.victims} in {MOVE_BOUND_S} s"


def wait_controller_moved(ctx: Ctx) -> None:
    before = ctx.epochs[-1]
    ok = wait_until(lambda: describe_cluster(ctx.cluster).controller_epoch > before, MOVE_BOUND_S)
    now = describe_cluster(ctx.cluster)
    ctx.notes.append(f"controller now {now.controller_id} epoch {now.controller_epoch}")
    assert ok, f"no new controller within {MOVE_BOUND_S} s: {ctx.notes}"


def dwell(ctx: Ctx, seconds: float = DWELL_S) -> None:
    """Let the fault last (the workload keeps running): a load duration, not a race wait."""
    time.sleep(seconds)


def probe_isolated_leader(ctx: Ctx, rounds: int = 3) -> None:
    """Write straight to the cut-off old leader of partition 0 (acks=all, bypassing the
    gateway) after another replica took over: with min.insync.replicas 2 it must never
    acknowledge. Records each outcome in `ctx.probes`."""
    proc = ctx.cluster.processes[ctx.victims[0]]
    for i in range(rounds):
        builder = BatchBuilder()
        builder.append(int(time.time() * 1000), None, b"probe|isolated-leader|%d" % i)
        request = data_pb2.ProduceRequest(
            acks=common_pb2.ACKS_ALL,
            timeout_ms=3000,
            partitions=[
                data_pb2.ProducePartition(topic=ctx.topic, partition=0, records=builder.build())
            ],
        )
        try:
            with sync_channel(proc.address) as channel:
                stub = storage_pb2_grpc.StorageServiceStub(channel)
                answer = stub.Produce(request, timeout=8).partitions[0]
        except grpc.RpcError as e:
            ctx.probes.append(f"rpc {e.code().name}")
            continue
        if answer.error_code == ErrorCode.NONE:
            ctx.probe_acked += 1
            ctx.probes.append(f"ACKNOWLEDGED at offset {answer.base_offset}")
        else:
            ctx.probes.append(ErrorCode(answer.error_code).name)


# ---- partitions -----------------------------------------------------------------------------


def isolate_leader(ctx: Ctx) -> None:
    ctx.net.isolate(leader_victim(ctx))
    wait_leadership_moved(ctx)
    dwell(ctx, 2.0)


def isolate_follower(ctx: Ctx) -> None:
    ctx.net.isolate(follower_victim(ctx))
    dwell(ctx)


def flapping_leader_isolation(ctx: Ctx, rounds: int = 4) -> None:
    """Jepsen's flapping partitions: `rounds` times, cut the current leader of p0 off from
    everyone until its leaderships move, heal, and wait (bounded) until every replica is back
    in the ISR; leadership keeps moving between nodes that just rejoined."""
    from faults import wait_for_full_isr

    victims = []
    for _ in range(rounds):
        victim = leader_victim(ctx)
        victims.append(victim)
        ctx.net.isolate(victim)
        wait_leadership_moved(ctx)
        ctx.net.heal()
        assert wait_for_full_isr(ctx.cluster, ctx.topic, MOVE_BOUND_S), f"ISR after {victim}"
    ctx.victims = victims
    ctx.affected = list(range(ctx.partitions))


def leader_from_controller(ctx: Ctx) -> None:
    """Cut the leader of p0 from the whole control plane (every metadata instance: any of
    them forwards to the controller) but not from clients, the gateway or its followers."""
    victim = leader_victim(ctx)
    ctx.net.isolate(victim, ctx.names("metadata"))
    wait_leadership_moved(ctx)
    probe_isolated_leader(ctx)


def leader_from_active_controller(ctx: Ctx) -> None:
    """Cut the leader of p0 from the active controller only: the other metadata instance
    forwards its requests, so nothing need move."""
    victim = leader_victim(ctx)
    active = controller(ctx.cluster).name
    ctx.notes.append(f"cut {victim} from {active}")
    ctx.net.isolate(victim, [active])
    dwell(ctx)


def isolate_controller(ctx: Ctx) -> None:
    ctx.net.isolate(controller_victim(ctx))
    wait_controller_moved(ctx)
    dwell(ctx, 2.0)


def majorities_ring(ctx: Ctx) -> None:
    names = ctx.names("storage")
    ctx.affected = list(range(ctx.partitions))
    ctx.victims = names
    ctx.net.ring(names)
    dwell(ctx)


def etcd_from_metadata(ctx: Ctx) -> None:
    before = describe_cluster(ctx.cluster)
    ctx.notes.append(f"controller {before.controller_id} epoch {before.controller_epoch}")
    ctx.affected = list(range(ctx.partitions))
    ctx.victims = ["etcd"]
    ctx.net.isolate("etcd", ctx.names("metadata"))
    dwell(ctx)


def heal(ctx: Ctx) -> None:
    ctx.net.heal()


def heal_then_metadata_writable(ctx: Ctx) -> None:
    """Heal, then the controller can write again: a topic can be created (bounded)."""
    ctx.net.heal()
    name = f"{ctx.topic}-after"

    def created() -> bool:
        try:
            ctx.cluster.create_topic(name, 1, 3, timeout=5)
        except RiverlogError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        return describe(ctx.cluster, name).partitions[0].leader >= 0

    assert wait_until(created, MOVE_BOUND_S, interval=0.5), "no topic created after healing"


# ---- slow and lossy links -------------------------------------------------------------------

EVERYONE = "*"


def impair(who: str, **kwargs: float) -> Step:
    """Impair the leader of p0 (`who="leader"`) or every process (`who=EVERYONE`)."""

    def inject(ctx: Ctx) -> None:
        if who == "leader":
            targets = [leader_victim(ctx)]
        else:
            targets = list(ctx.net.names)
            ctx.affected = list(range(ctx.partitions))
            ctx.victims = targets
        ctx.net.impair(targets, **kwargs)
        dwell(ctx)

    return inject


# ---- clocks ---------------------------------------------------------------------------------


def clock_jump(role: str, seconds: int) -> Step:
    def inject(ctx: Ctx) -> None:
        victim = leader_victim(ctx) if role == "leader" else controller_victim(ctx)
        assert ctx.nc.clocks is not None
        ctx.nc.clocks.jump(victim, seconds)
        ctx.notes.append(f"{victim} clock {seconds:+d} s")
        dwell(ctx)

    return inject


def clock_back_then_restart(ctx: Ctx) -> None:
    """Step the p0 leader's clock 10 minutes back, then kill -9 it and start it again at once
    (its old registration still live) under that clock: the restarted node must rejoin, its
    replicas back in the ISR, whatever its wall clock says (it is the same node restarted)."""
    from riverlog.cluster.process import pinned_ports

    victim = leader_victim(ctx)
    assert ctx.nc.clocks is not None
    ctx.nc.clocks.jump(victim, -CLOCK_JUMP_S)
    proc = ctx.cluster.processes[victim]
    proc.kill()
    proc.spawn(pinned_ports(proc.spec.args, proc.info) if proc.info else None)
    try:
        proc.wait_ready(30)
        ctx.notes.append(f"{victim} restarted with its clock {-CLOCK_JUMP_S} s")
    except Exception as e:
        ctx.notes.append(f"{victim} did not restart: {str(e).splitlines()[0]}")
        raise AssertionError(f"{victim} restarted 10 min back did not start: {e}") from None
    wait_leadership_moved(ctx)
    dwell(ctx, 2.0)


def clock_back(ctx: Ctx) -> None:
    assert ctx.nc.clocks is not None
    for victim in ctx.victims:
        ctx.nc.clocks.jump(victim, 0)


# ---- log dirs -------------------------------------------------------------------------------


def log_dir_full(ctx: Ctx) -> None:
    """Fill the p0 leader's log dir: its next write fails (ENOSPC); the node must take the
    dir offline and its leaderships must move (Kafka's log_dir_failure_test)."""
    victim = leader_victim(ctx)
    assert ctx.nc.disks is not None
    node = int(victim.rsplit("-", 1)[1])
    taken = ctx.nc.disks.fill(ctx.nc.log_dir(node))
    ctx.notes.append(f"filled {victim}'s log dir ({taken} bytes)")
    wait_leadership_moved(ctx)
    proc = ctx.cluster.processes[victim]
    ctx.notes.append(f"{victim} alive after the failure: {proc.alive}")


def free_and_restart(ctx: Ctx) -> None:
    """Free the space and restart the node (an offline log dir stays offline until then)."""
    from riverlog.cluster.process import pinned_ports

    assert ctx.nc.disks is not None
    victim = ctx.victims[0]
    ctx.nc.disks.free(ctx.nc.log_dir(int(victim.rsplit("-", 1)[1])))
    proc = ctx.cluster.processes[victim]
    if proc.alive:
        proc.stop(grace=5.0)
    proc.spawn(pinned_ports(proc.spec.args, proc.info) if proc.info else None)
    proc.wait_ready(60)


NEMESES = [
    Nemesis("isolate-leader", isolate_leader, heal, ci=True),
    Nemesis("isolate-follower", isolate_follower, heal),
    Nemesis("flapping-leader-isolation", flapping_leader_isolation, heal),
    Nemesis("leader-from-controller", leader_from_controller, heal, ci=True),
    Nemesis("leader-from-active-controller", leader_from_active_controller, heal),
    Nemesis("isolate-controller", isolate_controller, heal),
    Nemesis(
        "majorities-ring",
        majorities_ring,
        heal,
        storage_nodes=5,
        replication_factor=5,
        min_insync=3,
    ),
    Nemesis("etcd-from-metadata", etcd_from_metadata, heal_then_metadata_writable),
    Nemesis("slow-leader", impair("leader", delay_ms=100, jitter_ms=20), heal),
    Nemesis("slow-all", impair(EVERYONE, delay_ms=100, jitter_ms=20), heal),
    Nemesis("loss-leader", impair("leader", loss_pct=5), heal),
    Nemesis("loss-all", impair(EVERYONE, loss_pct=5), heal, ci=True),
    Nemesis("duplicate-leader", impair("leader", duplicate_pct=5), heal),
    Nemesis("duplicate-all", impair(EVERYONE, duplicate_pct=5), heal),
    Nemesis("reorder-leader", impair("leader", delay_ms=20, jitter_ms=10, reorder_pct=25), heal),
    Nemesis("reorder-all", impair(EVERYONE, delay_ms=20, jitter_ms=10, reorder_pct=25), heal),
    Nemesis("clock-leader+10m", clock_jump("leader", CLOCK_JUMP_S), clock_back, clocks=True),
    Nemesis("clock-leader-10m", clock_jump("leader", -CLOCK_JUMP_S), clock_back, clocks=True),
    Nemesis(
        "clock-controller+10m", clock_jump("controller", CLOCK_JUMP_S), clock_back, clocks=True
    ),
    Nemesis(
        "clock-controller-10m", clock_jump("controller", -CLOCK_JUMP_S), clock_back, clocks=True
    ),
    # The two scenarios that found bugs run in `make test` too, as their regression tests.
    Nemesis("clock-leader-10m-restart", clock_back_then_restart, clock_back, clocks=True, ci=True),
    Nemesis("log-dir-full", log_dir_full, free_and_restart, disk_mb=64, ci=True),
]

__all__ = ["CLIENTS", "NEMESES", "Ctx", "Nemesis"]
