"""`riverlog partitions reassign`: partition reassignment as Kafka's
`kafka-reassign-partitions.sh` (KIP-455), in Kafka's JSON plan format.

- `--generate --topics T1,T2 --nodes 1,2,4` prints the current assignment and a proposed plan
  that spreads those topics' partitions over the nodes (nothing changes);
- `--plan FILE --execute` prints the current assignment (save it to roll back), then starts
  every move of the plan; `--wait` waits until they completed; `--throttle BYTES_PER_S` first
  throttles the copy (`reassign_throttle.py`), and on a plan in progress updates the rate;
- `--plan FILE --verify` says of each planned partition whether its move completed, and once
  all did, removes the throttle;
- `--plan FILE --cancel` cancels the plan's moves in progress (the original replicas stay, the
  copies made so far are deleted);
- `--list` shows every move in progress with its adding and removing replicas, ISR, and the
  bytes the adding replicas copied and still lack next to the leader (only those of `--plan
  FILE` or `--topics T1,T2` when given; an unknown topic or partition is an error,
  UNKNOWN_TOPIC_OR_PARTITION, as in Kafka); `--wait` follows them until none is left, with a
  progress bar weighted by the bytes copied and remaining (`reassign_progress.py`).

`riverlog partitions drain --node N [--throttle BYTES_PER_S]` marks storage node N as draining
(nothing new is placed on it, the balancer included), empties it (every replica reassigned to
the other live nodes that are not draining, keeping replication factors and racks apart) and
waits until it holds none, the step before retiring a node outside the local launcher;
`--cancel` stops a drain (`node_drain.py`).

`--json` prints one document instead of text. The exit status is 1 when any partition was
refused (the reason on stderr) or a verified partition is not where the plan puts it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from riverlog.client import AdminClient, PartitionReassignment
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

from ..connection import add_connection_args, admin_client
from ..console import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, emit, to_json
from .node_drain import run_drain
from .reassign_plan import (
    Plan,
    PlanError,
    generate,
    parse_nodes,
    parse_plan,
    plan_document,
    verification_text,
    verify,
)
from .reassign_progress import progress_line
from .reassign_throttle import apply_throttle, clear_throttles

POLL_S = 0.5


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("partitions", help="partition reassignment")
    sub = parser.add_subparsers(dest="partitions_command", required=True, metavar="COMMAND")
    reassign = sub.add_parser("reassign", help="move partition replicas between storage nodes")
    action = reassign.add_mutually_exclusive_group(required=True)
    for flag, text in (
        ("--generate", "propose a plan moving --topics onto --nodes"),
        ("--execute", "start the moves of --plan"),
        ("--verify", "say whether the moves of --plan completed"),
        ("--cancel", "cancel the moves of --plan in progress"),
        ("--list", "show the moves in progress"),
    ):
        action.add_argument(flag, action="store_true", help=text)
    reassign.add_argument("--plan", type=Path, help="a plan in Kafka's JSON reassignment format")
    reassign.add_argument("--topics", help="--generate, --list: comma-separated topics")
    reassign.add_argument("--nodes", help="--generate: comma-separated storage node ids")
    reassign.add_argument("--wait", action="store_true", help="wait until the moves completed")
    reassign.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_S",
        help="--execute: throttle the replication of the moves to this rate",
    )
    reassign.add_argument(
        "--wait-timeout", type=float, default=600.0, help="seconds --wait waits at most"
    )
    reassign.add_argument("--json", action="store_true", help="print one JSON document")
    reassign.set_defaults(func=run_reassign)
    add_connection_args(reassign)
    drain = sub.add_parser(
        "drain", help="move every replica off one storage node before it is retired"
    )
    drain.add_argument("--node", type=int, required=True, help="the storage node to empty")
    drain.add_argument("--timeout", type=float, default=600.0, help="seconds the moves may take")
    drain.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_S",
        help="throttle the replication of the moves to this rate (removed when done)",
    )
    drain.add_argument(
        "--cancel",
        action="store_true",
        help="stop draining: unmark the node and cancel the moves off it in progress",
    )
    drain.add_argument("--json", action="store_true", help="print one JSON document")
    drain.set_defaults(func=run_drain)
    add_connection_args(drain)


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _load_plan(args: argparse.Namespace) -> Plan:
    if args.plan is None:
        raise CliError("--execute, --verify and --cancel need --plan FILE", EXIT_USAGE)
    try:
        return parse_plan(args.plan.read_text(encoding="utf-8"))
    except PlanError as exc:
        raise CliError(f"{args.plan}: {exc}") from None


def _current(admin: AdminClient, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
    described = admin.describe_topics(sorted(set(topics)))
    return {
        TopicPartition(name, p.partition): p.replicas
        for name, topic in described.items()
        for p in topic.partitions
    }


def ongoing_document(moves: Mapping[TopicPartition, PartitionReassignment]) -> dict[str, Any]:
    """What `--list --json` prints."""
    return {
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(m.replicas),
                "adding_replicas": list(m.adding_replicas),
                "removing_replicas": list(m.removing_replicas),
                "target_replicas": list(m.target),
                "isr": list(m.isr),
                "leader": m.leader,
                "bytes_copied": m.bytes_copied,
                "bytes_remaining": m.bytes_remaining,
                "replica_log_end_offsets": {str(n): leo for n, (leo, _) in m.replica_logs.items()},
            }
            for tp, m in sorted(moves.items(), key=lambda i: (i[0].topic, i[0].partition))
        ]
    }


def ongoing_text(document: Mapping[str, Any]) -> str:
    """Kafka's `--list` lines, with the ISR and the bytes copied and remaining."""
    rows = document["partitions"]
    if not rows:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for r in rows:
        lines.append(
            f"{r['topic']}-{r['partition']}: replicas: {_ids(r['replicas'])}. "
            f"adding: {_ids(r['adding_replicas'])}. removing: {_ids(r['removing_replicas'])}. "
            f"isr: {_ids(r['isr'])}. leader: {r['leader']}. "
            f"copied: {r['bytes_copied']} B. remaining: {_bytes(r['bytes_remaining'])}."
        )
    return "\n".join(lines)


def _bytes(count: int | None) -> str:
    return "unknown" if count is None else f"{count} B"


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _refusals(outcomes: Mapping[TopicPartition, RiverlogError | None]) -> list[str]:
    return [
        f"{_name(tp)}: {e.code.name}: {e.message}"
        for tp, e in sorted(outcomes.items(), key=lambda i: (i[0].topic, i[0].partition))
        if e is not None
    ]


def _wait(admin: AdminClient, partitions: Sequence[TopicPartition] | None, timeout: float) -> None:
    """Until none of `partitions` (None: any) is moving; a progress bar on stderr (redrawn on a
    terminal, a line per change otherwise)."""
    deadline = time.monotonic() + timeout
    tty = sys.stderr.isatty()
    shown = ""
    while True:
        moves = admin.list_partition_reassignments(partitions)
        if not moves:
            if tty and shown:
                print(file=sys.stderr)
            return
        if time.monotonic() >= deadline:
            raise CliError(f"{len(moves)} reassignments still in progress after {timeout:g} s")
        line = progress_line(moves)
        if tty:
            print(f"\r{line}", end="", file=sys.stderr, flush=True)
        elif line != shown:
            print(line, file=sys.stderr)
        shown = line
        time.sleep(POLL_S)


def run_reassign(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        if args.generate:
            return _generate(admin, args)
        if args.list:
            wanted = _list_filter(admin, args)
            if args.wait:
                _wait(admin, wanted, args.wait_timeout)
            document = ongoing_document(admin.list_partition_reassignments(wanted))
            emit(to_json(document) if args.json else ongoing_text(document))
            return EXIT_OK
        plan = _load_plan(args)
        if args.verify:
            return _verify(admin, plan, args)
        if args.cancel:
            outcomes = admin.alter_partition_reassignments(
                dict.fromkeys(plan), raise_on_error=False
            )
            return _report(outcomes, "cancelled", args)
        current = _current(admin, [tp.topic for tp in plan])
        rollback = {tp: current[tp] for tp in plan if tp in current}
        throttled = _throttle(admin, plan, args)
        outcomes = admin.alter_partition_reassignments(dict(plan), raise_on_error=False)
        if not args.json:
            emit(
                "Current partition replica assignment\n\n"
                f"{to_json(plan_document(rollback))}\n\n"
                "Save this to use as the --plan option during rollback"
            )
            if throttled:
                emit("\n".join(throttled))
        status = _report(outcomes, "started", args, rollback, throttled)
        if status == EXIT_OK and args.wait:
            _wait(admin, list(plan), args.wait_timeout)
            if not args.json:
                emit("All reassignments completed.")
        return status


def _list_filter(admin: AdminClient, args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions `--list` asks about: those of `--plan`, every partition of `--topics`,
    or None (all). An unknown topic or partition is refused by the metadata service with
    UNKNOWN_TOPIC_OR_PARTITION, never shown as "not moving"."""
    if args.plan is not None:
        return list(_load_plan(args))
    if args.topics:
        topics = [t for t in args.topics.split(",") if t]
        return list(_current(admin, topics))
    return None


def _throttle(admin: AdminClient, plan: Plan, args: argparse.Namespace) -> list[str]:
    if args.throttle is None:
        return []
    if args.throttle < 0:
        raise CliError(f"--throttle {args.throttle} is negative", EXIT_USAGE)
    return apply_throttle(admin, plan, args.throttle)


def _generate(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topics or not args.nodes:
        raise CliError("--generate needs --topics and --nodes", EXIT_USAGE)
    try:
        nodes = parse_nodes(args.nodes)
        current = _current(admin, [t for t in args.topics.split(",") if t])
        proposed = generate(current, nodes)
    except PlanError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if args.json:
        emit(to_json({"current": plan_document(current), "proposed": plan_document(proposed)}))
    else:
        emit(
            f"Current partition replica assignment\n{to_json(plan_document(current))}\n\n"
            f"Proposed partition reassignment configuration\n{to_json(plan_document(proposed))}"
        )
    return EXIT_OK


def _verify(admin: AdminClient, plan: Plan, args: argparse.Namespace) -> int:
    current = _current(admin, [tp.topic for tp in plan])
    moves = admin.list_partition_reassignments(list(plan))
    rows = verify(plan, current, {tp: m.target for tp, m in moves.items()})
    cleared = []
    if all(v.state == "complete" for v in rows):
        cleared = clear_throttles(admin, [tp.topic for tp in plan])
    if args.json:
        emit(
            to_json(
                {
                    "partitions": [
                        {
                            "topic": v.tp.topic,
                            "partition": v.tp.partition,
                            "state": v.state,
                            "replicas": list(v.replicas),
                            "target_replicas": list(v.target),
                        }
                        for v in rows
                    ],
                    "throttle_removed": cleared,
                }
            )
        )
    else:
        emit("\n".join([verification_text(rows), *cleared]))
    return EXIT_ERROR if any(v.state == "mismatch" for v in rows) else EXIT_OK


def _report(
    outcomes: Mapping[TopicPartition, RiverlogError | None],
    verb: str,
    args: argparse.Namespace,
    rollback: Mapping[TopicPartition, Sequence[int]] | None = None,
    throttled: Sequence[str] = (),
) -> int:
    done = sorted(
        (tp for tp, e in outcomes.items() if e is None), key=lambda t: (t.topic, t.partition)
    )
    refused = _refusals(outcomes)
    if args.json:
        document: dict[str, Any] = {
            verb: [{"topic": tp.topic, "partition": tp.partition} for tp in done],
            "errors": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "error": e.code.name,
                    "message": e.message,
                }
                for tp, e in sorted(outcomes.items(), key=lambda i: (i[0].topic, i[0].partition))
                if e is not None
            ],
        }
        if rollback is not None:
            document["rollback"] = plan_document(rollback)
        if throttled:
            document["throttle"] = list(throttled)
        emit(to_json(document))
    elif done:
        emit(
            f"Successfully {verb} partition reassignments for {', '.join(_name(tp) for tp in done)}"
        )
    for line in refused:
        print(f"riverlog: {line}", file=sys.stderr)
    return EXIT_ERROR if refused else EXIT_OK
