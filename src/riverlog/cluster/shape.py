"""Changing a running local cluster one process at a time (issue 13 item 3): start, stop and
restart a single process, add a new one, remove one for good. What `riverlog cluster start |
stop | restart | add | remove` run; the cluster may have been started by another process, so
every step works on a `LocalCluster.attach`ed handle and rewrites the state file.

Stopping is by the PID in the state (SIGTERM, SIGKILL after the grace period), never by name.
A process comes back with its node id, its log dirs and the ports it had, so the addresses its
peers hold stay valid; only its `--metadata` list is refreshed to the metadata instances running
now, as they may have changed since it was first started. Draining a storage node before it is
removed needs the AdminClient and lives in the CLI (`cli/commands/cluster_shape.py`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ClusterError
from .local import SERVICE_ROLES, START_ORDER, LocalCluster
from .process import ManagedProcess, ProcessSpec, pinned_ports

ADDABLE_ROLES = ("storage", "coordinator", "gateway", "quota", "metadata")
# A storage node leaves through its own drain (the CLI's). Metadata instances share etcd: one
# added campaigns for the controller with the others, one removed revokes its etcd lease so a
# standby takes over at once, and every process follows the live set through its Watch stream
# (decision 0026), so neither needs a restart elsewhere.
REMOVABLE_ROLES = ("coordinator", "gateway", "quota", "metadata")
LAYOUT_COUNTS = {
    "storage": "storage_nodes",
    "metadata": "metadata_nodes",
    "gateway": "gateways",
    "quota": "quota_nodes",
    "coordinator": "coordinators",
}


@contextmanager
def shape_lock(data_dir: Path) -> Iterator[None]:
    """Hold the cluster's shape lock (`run/shape.lock`, flock): two commands changing one cluster
    at once would pick the same new id or overwrite each other's state file. Released when the
    holder exits, however it exits."""
    path = data_dir / "run" / "shape.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def process_of(cluster: LocalCluster, role: str, node_id: int) -> ManagedProcess:
    """The recorded process `role-node_id`; ClusterError naming the ones there are."""
    if role not in SERVICE_ROLES:
        raise ClusterError(f"unknown kind {role!r}: expected one of {', '.join(SERVICE_ROLES)}")
    proc = cluster.processes.get(f"{role}-{node_id}")
    if proc is None:
        known = ", ".join(str(p.node_id) for p in cluster.by_role(role)) or "none"
        raise ClusterError(f"no {role} {node_id} in this cluster ({role} ids: {known})")
    return proc


def stop_process(cluster: LocalCluster, role: str, node_id: int, grace: float = 10.0) -> bool:
    """SIGTERM, SIGKILL after `grace`; False when it was not running."""
    proc = process_of(cluster, role, node_id)
    if not proc.alive:
        return False
    proc.stop(grace)
    if proc.alive:
        raise ClusterError(f"{proc.name} (pid {proc.pid}) still runs after SIGKILL")
    cluster.save_state()
    return True


def start_process(
    cluster: LocalCluster, role: str, node_id: int, timeout: float = 60.0
) -> ManagedProcess:
    """Start a stopped (or crashed) process again with its id, data and ports, and wait until
    it is ready and, for a storage node, until the gateways see it live again."""
    proc = process_of(cluster, role, node_id)
    if proc.alive:
        raise ClusterError(f"{proc.name} is already running (pid {proc.pid})")
    running = [p.address for p in cluster.by_role("metadata") if p.alive and p.address]
    if running:  # none (e.g. the only metadata instance restarting): the recorded list stands
        proc.spec = with_metadata(proc.spec, running)
    proc.restart(timeout)
    _wait_joined(cluster, proc, timeout)
    return proc


def restart_process(
    cluster: LocalCluster, role: str, node_id: int, timeout: float = 60.0, grace: float = 10.0
) -> ManagedProcess:
    stop_process(cluster, role, node_id, grace)
    return start_process(cluster, role, node_id, timeout)


def add_process(
    cluster: LocalCluster, role: str, rack: str | None = None, timeout: float = 60.0
) -> ManagedProcess:
    """Start a new process of `role` with the next free node id and add it to the state. A new
    storage node gets its own log dirs and joins with no partitions until some are reassigned
    to it. On failure the new process is stopped and forgotten."""
    if role not in ADDABLE_ROLES:
        raise ClusterError(f"cannot add a {role}: kinds that can be added: {ADDABLE_ROLES}")
    if rack is not None and role != "storage":
        raise ClusterError("--rack applies to storage nodes only")
    node_id = next_node_id(
        (p.node_id or 0 for p in cluster.by_role(role)),
        lambda n: role == "storage" and any(d.exists() for d in cluster.log_dirs(n)),
    )
    spec = cluster.service_spec(role, node_id)
    spec = with_metadata(spec, live_metadata(cluster))
    if rack is not None:
        spec = dataclasses.replace(
            spec, args=(*without_option(spec.args, "--rack"), "--rack", rack)
        )
    proc = ManagedProcess(spec, on_change=cluster.save_state)
    cluster.processes[spec.name] = proc
    try:
        proc.start(timeout)
        _wait_joined(cluster, proc, timeout)
    except BaseException:
        proc.stop(5.0)
        del cluster.processes[spec.name]
        cluster.save_state()
        raise
    _count_layout(cluster, role)
    return proc


def remove_process(
    cluster: LocalCluster, role: str, node_id: int, grace: float = 10.0
) -> ManagedProcess:
    """Stop a coordinator, gateway, quota or metadata instance and drop it from the state. A
    clean stop unregisters it, so the controller hands its `__consumer_offsets` partitions to
    the other coordinators, the gateways reshard quota entities over the other quota instances
    (which the leaving one hands its windows to), and a leaving controller's lease is revoked
    so another metadata instance is elected. The last instance of a kind is refused: the
    cluster would lose that service."""
    if role not in REMOVABLE_ROLES:
        hint = " (storage nodes drain first: riverlog cluster remove storage N)"
        raise ClusterError(f"cannot remove a {role} here{hint if role == 'storage' else ''}")
    proc = process_of(cluster, role, node_id)
    others = [p for p in cluster.by_role(role) if p is not proc and p.alive]
    if not others:
        raise ClusterError(f"{proc.name} is the last running {role}: stop it instead")
    return forget_process(cluster, proc, grace)


def forget_process(cluster: LocalCluster, proc: ManagedProcess, grace: float) -> ManagedProcess:
    """Stop `proc` and drop it from the cluster state (after any drain the caller did)."""
    if proc.alive:
        proc.stop(grace)
        if proc.alive:
            raise ClusterError(f"{proc.name} (pid {proc.pid}) still runs after SIGKILL")
    del cluster.processes[proc.name]
    _count_layout(cluster, proc.role)
    return proc


def resume(cluster: LocalCluster, timeout: float = 120.0) -> list[ManagedProcess]:
    """Start every recorded process that is not running, tier by tier in `up`'s order, each
    with its id, data and ports: the shape the cluster had when it stopped, with the nodes added
    since `up` and without the removed ones (`up` alone starts the counts it is given, ids from
    1). Returns the processes started; on failure stops those again (the ones that were
    running are left alone) and raises."""
    deadline = time.monotonic() + timeout
    started: list[ManagedProcess] = []
    try:
        for role in START_ORDER:
            tier = [p for p in cluster.by_role(role) if not p.alive]
            running = [p.address for p in cluster.by_role("metadata") if p.alive and p.address]
            for proc in tier:
                if running:
                    proc.spec = with_metadata(proc.spec, running)
                proc.spawn(pinned_ports(proc.spec.args, proc.info) if proc.info else None)
                started.append(proc)
            for proc in tier:
                proc.wait_ready(max(0.1, deadline - time.monotonic()))
        cluster.wait_ready(max(1.0, deadline - time.monotonic()))
    except BaseException:
        for proc in reversed(started):
            proc.stop(5.0)
        cluster.save_state()
        raise
    cluster.save_state()
    return started


def next_node_id(taken: Iterable[int], unusable: Callable[[int], bool] | None = None) -> int:
    """The smallest id above every recorded one that `unusable(id)` does not reject (a removed
    storage node's log dir still on disk: its id is not reused, as Kafka never reuses a
    broker id with stale data)."""
    candidate = max(taken, default=0) + 1
    while unusable is not None and unusable(candidate):
        candidate += 1
    return candidate


def live_metadata(cluster: LocalCluster) -> list[str]:
    addresses = [p.address for p in cluster.by_role("metadata") if p.alive and p.address]
    if not addresses:
        raise ClusterError("no metadata instance is running")
    return addresses


def with_metadata(spec: ProcessSpec, addresses: list[str]) -> ProcessSpec:
    """`spec` with its `--metadata` value set to `addresses` (metadata instances have none)."""
    args = list(spec.args)
    if "--metadata" not in args:
        return spec
    args[args.index("--metadata") + 1] = ",".join(addresses)
    return dataclasses.replace(spec, args=tuple(args))


def without_option(args: tuple[str, ...], option: str) -> tuple[str, ...]:
    """`args` without every `option VALUE` pair."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        else:
            out.append(arg)
    return tuple(out)


def _count_layout(cluster: LocalCluster, role: str) -> None:
    setattr(cluster.layout, LAYOUT_COUNTS[role], len(cluster.by_role(role)))
    cluster.save_state()


def _wait_joined(cluster: LocalCluster, proc: ManagedProcess, timeout: float) -> None:
    if proc.role == "storage" and proc.node_id is not None:
        live = [p.node_id or 0 for p in cluster.by_role("storage") if p.alive]
        cluster.wait_ready(timeout, storage_nodes=live)
