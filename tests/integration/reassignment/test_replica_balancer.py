"""The controller's replica balancer with real processes (issue 13 item 4, decision 0025): a
3-node cluster grown to 5 by `riverlog cluster add storage` with `balancer.enable=true` ends
with replica counts within one of each other and every record written before still readable;
`riverlog cluster balance --dry-run` plans without moving anything, `--execute --wait` carries
the plan out; a controller SIGKILLed as a node joins leaves the run to its successor, which
finishes it and removes the throttled-replicas configs. While the balancer's moves run, their
nodes carry `balancer.replication.throttled.rate` as their throttled rates, removed after; a
rate an operator set on a node stays as it was."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from reassign_harness import wait_until

from riverlog.client import AdminClient, Consumer, Producer, TopicPartition
from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

TOPICS = {"bal-a": (4, 3), "bal-b": (4, 2), "bal-c": (3, 2)}  # name: (partitions, RF)
RECORDS = 20
BALANCER_RATE = 40_000_000
OPERATOR_RATE = 30_000_000
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("balancer") / "c",
        storage_nodes=3,
        metadata_nodes=2,  # the second takes over when the last test kills the controller
        gateways=1,
        extra_config={
            "storage": {"replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "200"},
            "metadata": {
                "balancer.enable": "true",
                "balancer.max.concurrent.moves": "4",
                # only a node joining starts a run by itself here, so the test can skew the
                # cluster later and balance it by hand
                "balancer.imbalance.threshold": "1000",
                "balancer.replication.throttled.rate": str(BALANCER_RATE),
            },
        },
    )
    try:
        cluster.start(timeout=180)
        yield cluster
    finally:
        LocalCluster.attach(cluster.data_dir).stop()  # the CLI's added nodes too
        cluster.stop()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=cluster.gateway_address) as client:
        yield client


def cli(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "riverlog.cli.main", "cluster", *argv]
    command += ["--data-dir", str(cluster.data_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return done


def assignment(admin: AdminClient) -> dict[TopicPartition, tuple[int, ...]]:
    described = admin.describe_topics(list(TOPICS))
    return {
        TopicPartition(name, p.partition): p.replicas
        for name, d in described.items()
        for p in d.partitions
    }


def replica_counts(admin: AdminClient) -> dict[int, int]:
    nodes = {n.node_id for n in admin.describe_cluster().nodes if n.kind == "storage"}
    counts = dict.fromkeys(nodes, 0)
    for replicas in assignment(admin).values():
        for r in replicas:
            counts[r] += 1
    return counts


def settled_within_one(admin: AdminClient, nodes: int) -> dict[int, int] | None:
    """The replica counts once `nodes` storage nodes hold replicas within one of each other,
    nothing moves and the balancer's run has ended; None before."""
    counts = replica_counts(admin)
    if len(counts) != nodes or admin.list_partition_reassignments():
        return None
    if admin.balance_replicas(dry_run=True).running:
        return None
    return counts if max(counts.values()) - min(counts.values()) <= 1 else None


def read_partition(cluster: LocalCluster, tp: TopicPartition) -> list[bytes]:
    out: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.gateway_address) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(out) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.value or b"" for r in records)
    return out


THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def throttles_cleared(admin: AdminClient) -> bool:
    """No topic still names throttled replicas (the balancer removes them after each move)."""
    configs = admin.describe_configs(list(TOPICS))
    return all(configs[t][k].is_default for t in TOPICS for k in THROTTLE_KEYS)


def check_every_record(cluster: LocalCluster, written: dict[TopicPartition, list[bytes]]) -> None:
    for tp, values in written.items():
        assert read_partition(cluster, tp) == values, tp


def test_grown_cluster_balances_itself_and_balance_cli_plans_and_executes(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    written: dict[TopicPartition, list[bytes]] = {}
    with Producer(bootstrap_servers=cluster.gateway_address, acks="all") as producer:
        for name, (partitions, rf) in TOPICS.items():
            cluster.create_topic(name, partitions, rf)
            for p in range(partitions):
                values = [b"%s-%d-%03d" % (name.encode(), p, i) for i in range(RECORDS)]
                for v in values:
                    producer.send(name, v, partition=p).result(60)
                written[TopicPartition(name, p)] = values

    cli(cluster, "add", "storage")
    cli(cluster, "add", "storage")
    counts = wait_until(lambda: settled_within_one(admin, 5), 420, "5 nodes within one")
    assert sum(counts.values()) == sum(n * rf for n, rf in TOPICS.values())  # no RF changed
    assert min(counts.values()) > 0
    wait_until(lambda: throttles_cleared(admin), 30, "throttled replicas removed")
    check_every_record(cluster, written)
    # the storage nodes' heartbeats carry their replica sizes, so the plan knows bytes
    sized = wait_until(
        lambda: all(n.bytes is not None for n in admin.balance_replicas().nodes.values()),
        60,
        "replica sizes reported",
    )
    assert sized

    # Skew it by hand (the threshold keeps the balancer from reacting): bal-b onto nodes 1, 2.
    admin.alter_partition_reassignments(
        {TopicPartition("bal-b", p): [1, 2] for p in range(TOPICS["bal-b"][0])}
    )
    wait_until(lambda: not admin.list_partition_reassignments(), 120, "the skew to land")
    # a partition now only on nodes that have not reported it yet has no size until their next
    # report (every 10 s); the plan below compares bytes
    wait_until(
        lambda: all(n.bytes is not None for n in admin.balance_replicas().nodes.values()),
        60,
        "the moved partitions' sizes reported",
    )
    skewed = assignment(admin)
    spread = max(replica_counts(admin).values()) - min(replica_counts(admin).values())
    assert spread > 1

    plan = json.loads(cli(cluster, "balance", "--dry-run", "--json").stdout)
    assert plan["moves"] and not plan["running"]
    assert plan["replica_spread"]["before"] == spread
    assert plan["replica_spread"]["after"] <= 1
    assert all(n["bytes_before"] > 0 for n in plan["nodes"])  # every node holds records
    for move in plan["moves"]:
        tp = TopicPartition(move["topic"], move["partition"])
        assert move["current"] == list(skewed[tp])
        assert len(set(move["target"])) == len(move["target"]) == len(move["current"])
    assert assignment(admin) == skewed and not admin.list_partition_reassignments()
    again = json.loads(cli(cluster, "balance", "--dry-run", "--json").stdout)
    assert again["moves"] == plan["moves"]  # nothing ran meanwhile

    # Hold open a move that copies (a replica joins); a plan may also only reorder leaders.
    copying = [m for m in plan["moves"] if set(m["target"]) - set(m["current"])]
    assert copying, plan["moves"]  # the grown nodes must receive replicas
    execute_with_a_move_held_open(cluster, admin, copying[0])
    assert wait_until(lambda: settled_within_one(admin, 5), 60, "balanced by hand")
    wait_until(lambda: throttles_cleared(admin), 30, "throttled replicas removed")
    check_every_record(cluster, written)


def rates(admin: AdminClient) -> dict[int, tuple[str, ...]]:
    """The throttled rates set on each node's own entity (nodes with none left out)."""
    out: dict[int, tuple[str, ...]] = {}
    for node, entries in admin.describe_node_configs(all_nodes=True).items():
        if node is not None and any(not entries[k].is_default for k in RATE_KEYS):
            out[node] = tuple(entries[k].value or "" for k in RATE_KEYS)
    return out


def execute_with_a_move_held_open(
    cluster: LocalCluster, admin: AdminClient, first: dict[str, Any]
) -> None:
    """`cluster balance --execute --wait` with the node the plan's first move adds paused
    (SIGSTOP, well within its session and replica.lag.time.max.ms), so that move cannot end
    before the rates are read: every node of it carries the balancer's rate, except a node on
    which an operator set one, which keeps it; once the run is done the balancer's rates are
    gone and the operator's is still there."""
    current = [int(r) for r in first["current"]]
    target = [int(r) for r in first["target"]]
    joining = next(r for r in target if r not in current)
    operator_node = current[0]
    admin.alter_node_configs({operator_node: dict.fromkeys(RATE_KEYS, OPERATOR_RATE)})
    node = LocalCluster.attach(cluster.data_dir).storage(joining)  # added by the CLI
    tp = TopicPartition(first["topic"], first["partition"])
    command = [sys.executable, "-m", "riverlog.cli.main", "cluster", "balance", "--execute"]
    command += ["--wait", "--data-dir", str(cluster.data_dir)]
    node.pause()
    try:
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        moving = wait_until(
            lambda: admin.list_partition_reassignments().get(tp), 30, "the first move issued"
        )
        assert joining in moving.adding_replicas
        during = rates(admin)
    finally:
        node.resume()
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    balancer = (str(BALANCER_RATE),) * 2
    assert during[operator_node] == (str(OPERATOR_RATE),) * 2
    assert all(during.get(r) == balancer for r in {*current, *target} - {operator_node}), during

    def only_the_operators() -> dict[int, tuple[str, ...]] | None:
        now = rates(admin)
        return now if set(now) == {operator_node} else None

    after = wait_until(only_the_operators, 30, "the balancer's rates removed")
    assert after[operator_node] == (str(OPERATOR_RATE),) * 2
    admin.alter_node_configs({operator_node: dict.fromkeys(RATE_KEYS)})


def test_new_controller_finishes_the_run_of_a_killed_one(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    """Whatever the killed controller had issued is partition state in etcd (KIP-455): the new
    one completes those moves, starts its own run for the joined node, and adopts and removes
    the throttle entries."""
    written = {
        TopicPartition(name, p): [b"%s-%d-%03d" % (name.encode(), p, i) for i in range(RECORDS)]
        for name, (partitions, _) in TOPICS.items()
        for p in range(partitions)
    }
    before = cluster.describe_cluster()
    cli(cluster, "add", "storage")
    cluster.metadata(before.controller_id).kill(signal.SIGKILL)
    wait_until(
        lambda: cluster.describe_cluster().controller_id not in (-1, before.controller_id),
        60,
        "a new controller",
    )
    counts = wait_until(lambda: settled_within_one(admin, 6), 420, "6 nodes within one")
    assert min(counts.values()) > 0
    wait_until(lambda: throttles_cleared(admin), 30, "throttled replicas removed")
    check_every_record(cluster, written)


def storage_partitions(admin: AdminClient, node: int) -> list[TopicPartition]:
    """Every partition, internal ones included, with a replica on `node`."""
    described = admin.describe_topics(include_internal=True)
    return [
        TopicPartition(name, p.partition)
        for name, d in described.items()
        for p in d.partitions
        if node in p.replicas
    ]


def test_a_drained_node_gets_nothing_back_from_the_balancer(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    """`partitions drain` with balancer.enable=true: the drained node is left empty and still
    registered, which is exactly what a node that just joined looks like, so without the
    draining mark the balancer planned moves back onto it. With it the node is out of the
    balancer's plan, of placement and of reassignment targets; the drain's throttle is removed
    when it ends; `cluster remove storage` then stops the node and the mark goes with it."""
    wait_until(lambda: settled_within_one(admin, 6), 120, "the previous run to end")
    node = max(n.node_id for n in admin.describe_cluster().nodes if n.kind == "storage")
    held = storage_partitions(admin, node)
    assert held
    command = [sys.executable, "-m", "riverlog.cli.main", "partitions", "drain"]
    command += ["--node", str(node), "--throttle", "50000000", "--json", "--timeout", "300"]
    command += ["--bootstrap", cluster.gateway_address]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {TopicPartition(m["topic"], m["partition"]) for m in document["moved"]} == set(held)
    assert document["draining_nodes"] == [node]
    assert document["throttle"] and document["throttle_removed"]

    assert admin.describe_cluster().draining == (node,)
    plan = admin.balance_replicas(dry_run=True)
    assert node not in plan.nodes
    assert all(node not in m.target for m in plan.moves), plan.moves
    assert any(f"[{node}]" in note for note in plan.notes)
    # whatever run the drain set off has ended, and the node is still empty
    wait_until(
        lambda: (
            not admin.list_partition_reassignments()
            and not admin.balance_replicas(dry_run=True).running
        ),
        120,
        "the balancer idle",
    )
    assert storage_partitions(admin, node) == []
    rates = admin.describe_node_configs(all_nodes=True)
    assert all(
        entry.is_default
        for entity in rates.values()
        for key, entry in entity.items()
        if key.endswith("replication.throttled.rate")
    )
    assert throttles_cleared(admin)
    cluster.create_topic("after-drain", 10, 2)
    assert all(
        node not in p.replicas
        for p in admin.describe_topics(["after-drain"])["after-drain"].partitions
    )

    removed = json.loads(cli(cluster, "remove", "storage", str(node), "--json").stdout)
    assert removed["removed"] == f"storage-{node}" and removed["moved"] == []
    wait_until(lambda: admin.describe_cluster().draining == (), 60, "the mark dropped")
