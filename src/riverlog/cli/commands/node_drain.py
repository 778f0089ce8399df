"""Emptying a storage node before it is retired: `riverlog partitions drain --node N` on any
cluster (through its gateways), and the drain step of `riverlog cluster remove storage N`.

The node is first marked as draining on the controller (`AdminClient.alter_node_draining`,
decision 0025's addendum), so nothing places a new replica on it meanwhile: not topic
creation, not another reassignment, not the replica balancer, which would otherwise see an
emptied node and move replicas back. Then every partition with a replica on N, internal topics
included, is reassigned (KIP-455) to other live storage nodes that are not draining themselves,
keeping its replication factor (`drain_plan`; a partition already moving counts at its target),
and the command waits until no partition names N, with the reassignment progress bar. With
`--throttle R` the copy is throttled as `partitions reassign --throttle` does, and the throttle
is removed once the node is empty, as `--verify` does. `--cancel` unmarks the node and cancels
the moves off it still in progress (the original replicas stay; the throttle goes, as Kafka's
`--cancel` removes it). Outside the local launcher nothing stops the node afterwards: that is
the operator's next step (in Kubernetes, scaling the StatefulSet down by one, when N is the
highest ordinal; see deploy/README.md); the mark stays until the node unregisters.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from riverlog.client import AdminClient
from riverlog.cluster.errors import ClusterError
from riverlog.common.types import TopicPartition

from ..connection import admin_client
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, to_json
from .drain_plan import DrainError, drain_plan
from .reassign_plan import Plan
from .reassign_progress import progress_line
from .reassign_throttle import apply_throttle, clear_throttles

POLL_S = 0.5
PLAN_ATTEMPTS = 3  # a move refused because its new node started draining meanwhile is replanned


@dataclass
class DrainResult:
    """What a drain did: each moved partition's replicas before and its target."""

    node: int
    moves: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )
    throttle: list[str] = field(default_factory=list)
    throttle_removed: list[str] = field(default_factory=list)
    draining: tuple[int, ...] = ()

    def document(self) -> dict[str, Any]:
        """What `--json` prints."""
        return {
            "node": self.node,
            "moved": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(before),
                    "target_replicas": list(target),
                }
                for tp, (before, target) in sorted(
                    self.moves.items(), key=lambda i: (i[0].topic, i[0].partition)
                )
            ],
            "draining_nodes": list(self.draining),
            "throttle": self.throttle,
            "throttle_removed": self.throttle_removed,
        }


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def drain(
    admin: AdminClient,
    node_id: int,
    timeout: float,
    throttle: int | None = None,
    report: Callable[[str], None] = _stderr,
) -> DrainResult:
    """Mark storage node `node_id` as draining, reassign every replica on it to other live
    storage nodes that are not draining, and wait until no partition names it. DrainError
    (nothing changed) when the others cannot hold a partition's replication factor;
    ClusterError when a move is refused or the moves did not finish within `timeout`."""
    if throttle is not None and throttle < 0:
        raise ClusterError(f"--throttle {throttle} is negative")
    result = DrainResult(node_id)
    plan = _plan(admin, node_id)  # DrainError here: nothing was marked or moved
    already = node_id in admin.describe_cluster().draining
    admin.alter_node_draining(node_id, True)
    try:
        plan = _plan(admin, node_id)  # again: a node may have started draining meanwhile
    except DrainError:
        if not already:
            admin.alter_node_draining(node_id, False)
        raise
    before = _targets(admin)
    if plan and throttle is not None:
        result.throttle = apply_throttle(admin, plan, throttle)
    for _ in range(PLAN_ATTEMPTS):
        if not plan:
            break
        outcomes = admin.alter_partition_reassignments(dict(plan), raise_on_error=False)
        result.moves.update(
            (tp, (before.get(tp, ()), plan[tp])) for tp, e in outcomes.items() if not e
        )
        refused = {tp: e for tp, e in outcomes.items() if e is not None}
        plan = {t: r for t, r in _plan(admin, node_id).items() if t in refused} if refused else {}
    if plan:
        raise ClusterError(
            f"draining node {node_id}: moves refused: "
            + "; ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in refused.items())
        )
    _wait_empty(admin, node_id, timeout, report)
    if result.throttle:  # set by this drain: removed by it
        result.throttle_removed = clear_throttles(admin, sorted({tp.topic for tp in result.moves}))
    result.draining = admin.describe_cluster().draining
    return result


def _plan(admin: AdminClient, node_id: int) -> Plan:
    described = admin.describe_cluster()
    live = {n.node_id: n.rack for n in described.nodes if n.kind == "storage"}
    return drain_plan(_targets(admin), node_id, live, racks=live, draining=described.draining)


def _targets(admin: AdminClient) -> Plan:
    """Every partition's replicas, a moving one's at its target (less the removing ones)."""
    described = admin.describe_topics(include_internal=True)
    return {
        TopicPartition(name, p.partition): tuple(
            r for r in p.replicas if r not in p.removing_replicas
        )
        for name, topic in described.items()
        for p in topic.partitions
    }


def _wait_empty(
    admin: AdminClient, node_id: int, timeout: float, report: Callable[[str], None]
) -> None:
    deadline = time.monotonic() + timeout
    shown = ""
    while True:
        described = admin.describe_topics(include_internal=True)
        left = {
            TopicPartition(name, p.partition)
            for name, topic in described.items()
            for p in topic.partitions
            if node_id in p.replicas
        }
        if not left:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"storage node {node_id} still holds {len(left)} partitions after {timeout:g} s "
                "(riverlog partitions reassign --list shows the moves; riverlog partitions "
                f"drain --node {node_id} --cancel gives up)"
            )
        moves = {tp: m for tp, m in admin.list_partition_reassignments().items() if tp in left}
        line = f"draining node {node_id}: {len(left)} partitions left"
        if moves:
            line += " " + progress_line(moves)
        if line != shown:
            report(line)
            shown = line
        time.sleep(POLL_S)


def undrain(admin: AdminClient, node_id: int) -> tuple[list[TopicPartition], list[str]]:
    """Unmark `node_id` and cancel the moves off it in progress; the cancelled partitions and
    what was said about the throttle (removed from their topics and the nodes)."""
    admin.alter_node_draining(node_id, False)
    moving = admin.list_partition_reassignments()
    off = sorted(
        (tp for tp, m in moving.items() if node_id in m.removing_replicas),
        key=lambda t: (t.topic, t.partition),
    )
    if not off:
        return [], []
    admin.alter_partition_reassignments(dict.fromkeys(off), raise_on_error=False)
    return off, clear_throttles(admin, sorted({tp.topic for tp in off}))


def run_drain(args: argparse.Namespace) -> int:
    """`riverlog partitions drain --node N [--throttle R] [--cancel] [--json]`."""
    if args.cancel and args.throttle is not None:
        raise CliError("--cancel takes no --throttle", EXIT_USAGE)
    try:
        with admin_client(args) as admin:
            if args.cancel:
                return _cancel(admin, args)
            result = drain(admin, args.node, args.timeout, args.throttle)
    except (ClusterError, DrainError) as e:
        raise CliError(str(e)) from None
    if args.json:
        emit(to_json(result.document()))
    else:
        report(result, "; it holds none now and can be stopped")
    return EXIT_OK


def report(result: DrainResult, tail: str = "") -> None:
    """The drain's outcome as lines on stderr (`--json` prints `result.document()`)."""
    for line in result.throttle:
        _stderr(line)
    _stderr(f"moved {len(result.moves)} partitions off storage node {result.node}{tail}")
    for line in result.throttle_removed:
        _stderr(line)


def _cancel(admin: AdminClient, args: argparse.Namespace) -> int:
    cancelled, cleared = undrain(admin, args.node)
    if args.json:
        emit(
            to_json(
                {
                    "node": args.node,
                    "cancelled": [{"topic": t.topic, "partition": t.partition} for t in cancelled],
                    "draining_nodes": list(admin.describe_cluster().draining),
                    "throttle_removed": cleared,
                }
            )
        )
        return EXIT_OK
    names = ", ".join(f"{t.topic}-{t.partition}" for t in cancelled) or "none"
    _stderr(f"storage node {args.node} is no longer draining; moves cancelled: {names}")
    for line in cleared:
        _stderr(line)
    return EXIT_OK
