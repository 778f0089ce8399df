"""`riverlog cluster balance [--dry-run | --execute] [--wait] [--json]`: the controller's replica
balancer as a one-off (decision 0025), as Cruise Control's rebalance endpoint or rpk's
`cluster partitions balance`.

The plan comes from the controller (BalanceReplicas), so the same planner and limits answer a
dry run, an `--execute` and `balancer.enable`. `--dry-run` (the default) prints each partition's
current → target replicas and the replica, leader and byte counts of every live storage node
before and after, changing nothing. `--execute` starts a balancing run on the controller: it
issues the moves through partition reassignment, at most `balancer.max.concurrent.moves`
partitions copying at a time, planning again after each batch until balanced. `--wait` follows
the run with the reassignment progress bar until it ends.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from riverlog.client import AdminClient, BalancePlan

from ..connection import add_connection_args, admin_client, local_cluster_bootstrap
from ..console import EXIT_OK, CliError, emit, table, to_json
from .partitions import POLL_S
from .reassign_progress import progress_line


def register(sub: Any) -> None:
    """Add `balance` to `riverlog cluster`'s subparsers."""
    parser = sub.add_parser("balance", help="even out replicas, leaders and racks over the nodes")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="start moving (a balancing run)")
    parser.add_argument("--wait", action="store_true", help="with --execute: wait until done")
    parser.add_argument("--wait-timeout", type=float, default=1800.0, help="seconds for --wait")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--data-dir", type=Path, help="a local cluster's data directory (for its bootstrap)"
    )
    add_connection_args(parser)
    parser.set_defaults(func=run_balance)


def plan_document(plan: BalancePlan) -> dict[str, Any]:
    """What `--json` prints."""
    return {
        "moves": [
            {
                "topic": m.partition.topic,
                "partition": m.partition.partition,
                "current": list(m.current),
                "target": list(m.target),
                "bytes_to_copy": m.bytes_to_copy,
            }
            for m in plan.moves
        ],
        "nodes": [
            {
                "node_id": n.node_id,
                "rack": n.rack,
                "replicas_before": n.replicas[0],
                "replicas_after": n.replicas[1],
                "leaders_before": n.leaders[0],
                "leaders_after": n.leaders[1],
                "bytes_before": n.bytes[0] if n.bytes else None,
                "bytes_after": n.bytes[1] if n.bytes else None,
            }
            for n in plan.nodes.values()
        ],
        "replica_spread": {"before": plan.replica_spread(), "after": plan.replica_spread(True)},
        "leader_spread": {"before": plan.leader_spread(), "after": plan.leader_spread(True)},
        "rack_violations": {"before": plan.rack_violations[0], "after": plan.rack_violations[1]},
        "moves_in_progress": plan.moves_in_progress,
        "max_concurrent_moves": plan.max_concurrent_moves,
        "balancer_enabled": plan.enabled,
        "running": plan.running,
        "notes": list(plan.notes),
    }


def plan_text(plan: BalancePlan) -> str:
    head = (
        f"Balancing plan: {len(plan.moves)} partitions to move, at most "
        f"{plan.max_concurrent_moves} copying at a time ({plan.moves_in_progress} in progress)"
    )
    moves = table(
        ["topic", "partition", "current", "target", "bytes"],
        [
            (m.partition.topic, m.partition.partition, m.current, m.target, m.bytes_to_copy)
            for m in plan.moves
        ],
    )
    nodes = table(
        ["node", "rack", "replicas", "leaders", "bytes"],
        [
            (
                n.node_id,
                n.rack or "-",
                f"{n.replicas[0]} -> {n.replicas[1]}",
                f"{n.leaders[0]} -> {n.leaders[1]}",
                f"{n.bytes[0]} -> {n.bytes[1]}" if n.bytes else "unknown",
            )
            for n in plan.nodes.values()
        ],
    )
    spread = (
        f"Replica spread {plan.replica_spread()} -> {plan.replica_spread(True)}, leader spread "
        f"{plan.leader_spread()} -> {plan.leader_spread(True)}, rack violations "
        f"{plan.rack_violations[0]} -> {plan.rack_violations[1]}"
    )
    parts = [head, moves if plan.moves else "(already balanced)", nodes, spread]
    parts += [f"note: {n}" for n in plan.notes]
    return "\n\n".join(parts)


def _wait(admin: AdminClient, timeout: float) -> BalancePlan:
    """Until the controller's run ended and nothing moves; the reassignment progress bar on
    stderr meanwhile. The plan left at the end (empty once balanced)."""
    deadline = time.monotonic() + timeout
    shown = ""
    while True:
        moves = admin.list_partition_reassignments()
        plan = admin.balance_replicas(dry_run=True)
        if not moves and not plan.running:
            return plan
        if time.monotonic() >= deadline:
            raise CliError(f"the balancing run is still going after {timeout:g} s")
        line = progress_line(moves) if moves else "planning the next batch"
        if line != shown:
            print(line, file=sys.stderr)
            shown = line
        time.sleep(POLL_S)


def run_balance(args: argparse.Namespace) -> int:
    if args.wait and not args.execute:
        raise CliError("--wait goes with --execute", 2)
    if args.bootstrap is None and args.data_dir is not None:
        args.bootstrap = local_cluster_bootstrap(Path(args.data_dir).expanduser())
    with admin_client(args) as admin:
        plan = admin.balance_replicas(dry_run=not args.execute)
        emit(to_json(plan_document(plan)) if args.json else plan_text(plan))
        if args.execute and not args.json:
            emit("Balancing run started." if plan.moves else "Nothing to move.")
        if args.execute and args.wait:
            left = _wait(admin, args.wait_timeout)
            if not args.json:
                emit(
                    f"Balancing run finished: replica spread {left.replica_spread()}, "
                    f"leader spread {left.leader_spread()}."
                )
    return EXIT_OK
