"""Named failures on a real local cluster, after redpanda's `failure_injector.py`: find the
process that plays a role right now (the leader of a partition, the active controller, etcd)
and kill it with SIGKILL, pause it with SIGSTOP past its lease and resume it with SIGCONT, or
restart it on its old ports. Every signal goes to a PID the launcher recorded, never to a name.
Also the waits the scenarios need: a leader per partition, a full ISR again, a controller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from riverlog.client import AdminClient
from riverlog.client.admin import ClusterDescription, TopicDescription
from riverlog.cluster import LocalCluster, ManagedProcess

# Leases short enough that a scenario takes seconds: a node or controller is gone 3 s after its
# last heartbeat; a follower leaves the ISR 3 s after it last caught up.
SESSION_TIMEOUT_MS = 3000
LEASE_CONFIG = {
    "metadata": {
        "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "broker.heartbeat.interval.ms": "500",
        "metadata.controller.lease.ms": str(SESSION_TIMEOUT_MS),
    },
    "storage": {"replica.lag.time.max.ms": str(SESSION_TIMEOUT_MS)},
}
PAST_LEASE_S = 2 * SESSION_TIMEOUT_MS / 1000 + 1.0


def storage_keys() -> set[str] | None:
    """The `--config` keys the storage node accepts today (None: cannot tell), so the lease
    settings are only passed once the storage service knows them."""
    try:
        from riverlog.services.storage.config import known_keys
    except Exception:
        return None
    return set(known_keys())


def lease_config() -> dict[str, dict[str, str]]:
    """LEASE_CONFIG without the keys a service does not know yet (it would refuse to start)."""
    known = storage_keys()
    storage = {k: v for k, v in LEASE_CONFIG["storage"].items() if known is None or k in known}
    return {"metadata": dict(LEASE_CONFIG["metadata"]), "storage": storage}


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.2) -> bool:
    """Poll `predicate` (exceptions count as False) until true or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return True
        except Exception:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 5000})


def describe(cluster: LocalCluster, topic: str) -> TopicDescription:
    with admin(cluster) as client:
        return client.describe_topics([topic])[topic]


def describe_cluster(cluster: LocalCluster) -> ClusterDescription:
    with admin(cluster) as client:
        return client.describe_cluster()


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    return describe(cluster, topic).partitions[partition].leader


def led_by(description: TopicDescription, node: int) -> list[int]:
    """The partitions `node` leads."""
    return [p.partition for p in description.partitions if p.leader == node]


def controller(cluster: LocalCluster) -> ManagedProcess:
    """The metadata instance DescribeCluster names as the active controller."""
    return cluster.metadata(describe_cluster(cluster).controller_id)


def wait_for_leaders(cluster: LocalCluster, topic: str, timeout: float) -> bool:
    return wait_until(
        lambda: all(p.leader >= 0 for p in describe(cluster, topic).partitions), timeout
    )


def wait_for_full_isr(cluster: LocalCluster, topic: str, timeout: float) -> bool:
    """Every partition has a leader and every replica in its ISR."""

    def full() -> bool:
        parts = describe(cluster, topic).partitions
        return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts)

    return wait_until(full, timeout, interval=0.5)


def kill(proc: ManagedProcess) -> None:
    """kill -9, waiting (bounded) until the PID is gone."""
    proc.kill()


def pause_past_lease(proc: ManagedProcess, seconds: float = PAST_LEASE_S) -> None:
    """SIGSTOP, sleep past its lease, SIGCONT: a zombie that wakes up."""
    proc.pause()
    try:
        time.sleep(seconds)
    finally:
        proc.resume()


def pause_until(proc: ManagedProcess, done: Callable[[], object], timeout: float) -> bool:
    """SIGSTOP until `done()` (polled as `wait_until`: the cluster acted on the pause, e.g.
    elected past its lease), at most `timeout` s, then SIGCONT: a zombie that wakes up right
    after it was replaced. Returns whether `done()` became true."""
    proc.pause()
    try:
        return wait_until(done, timeout)
    finally:
        proc.resume()


def restart_all(procs: Iterable[ManagedProcess], timeout: float = 60.0) -> None:
    """Start killed processes again on their old ports, in parallel, and wait for each."""
    from riverlog.cluster.process import pinned_ports

    started = list(procs)
    for proc in started:
        proc.spawn(pinned_ports(proc.spec.args, proc.info) if proc.info else None)
    for proc in started:
        proc.wait_ready(timeout)


def restart_etcd(cluster: LocalCluster, down_s: float = 2.0) -> None:
    """kill -9 the launcher's etcd and start it again on the same ports and data dir."""
    etcd = cluster.processes["etcd"]
    etcd.kill()
    time.sleep(down_s)
    etcd.restart(timeout=30)
