"""Emptying a storage node before it is retired: `riverlog partitions drain --node N` on any
cluster (through its gateways), and the drain step of `riverlog cluster remove storage N`.

Every partition with a replica on N, internal topics included, is reassigned (KIP-455) to
other live storage nodes keeping its replication factor (`drain_plan`), then the command waits
until no partition names N. Outside the local launcher nothing stops the node afterwards: that
is the operator's next step (in Kubernetes, scaling the StatefulSet down by one, when N is the
highest ordinal; see deploy/README.md).
"""

from __future__ import annotations

import argparse
import sys
import time

from riverlog.client import AdminClient
from riverlog.cluster.errors import ClusterError
from riverlog.common.types import TopicPartition

from ..connection import admin_client
from ..console import EXIT_OK, CliError
from .drain_plan import DrainError, drain_plan
from .reassign_plan import Plan

POLL_S = 0.5


def drain(admin: AdminClient, node_id: int, timeout: float) -> int:
    """Reassign every replica on storage node `node_id` to other live storage nodes and wait
    until no partition names it; returns how many partitions moved. DrainError (nothing
    moved) when the others cannot hold a partition's replication factor; ClusterError when
    the moves did not finish within `timeout`."""
    live = {n.node_id: n.rack for n in admin.describe_cluster().nodes if n.kind == "storage"}
    plan = drain_plan(_assignment(admin), node_id, live, racks=live)
    if plan:
        admin.alter_partition_reassignments(dict(plan))
    deadline = time.monotonic() + timeout
    while True:
        left = [tp for tp, replicas in _assignment(admin).items() if node_id in replicas]
        if not left:
            return len(plan)
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"storage node {node_id} still holds {len(left)} partitions after {timeout:g} s "
                "(riverlog partitions reassign --list shows the moves)"
            )
        print(f"draining node {node_id}: {len(left)} partitions left", file=sys.stderr)
        time.sleep(POLL_S)


def _assignment(admin: AdminClient) -> Plan:
    described = admin.describe_topics(include_internal=True)
    return {
        TopicPartition(name, p.partition): tuple(p.replicas)
        for name, topic in described.items()
        for p in topic.partitions
    }


def run_drain(args: argparse.Namespace) -> int:
    """`riverlog partitions drain --node N`."""
    try:
        with admin_client(args) as admin:
            moved = drain(admin, args.node, args.timeout)
    except (ClusterError, DrainError) as e:
        raise CliError(str(e)) from None
    print(
        f"moved {moved} partitions off storage node {args.node}; it holds none now and can be "
        "stopped",
        file=sys.stderr,
    )
    return EXIT_OK
