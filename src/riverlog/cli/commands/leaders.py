"""`riverlog leaders elect --preferred | --unclean [--topic T [--partition P]]`: leader election
on demand, as Kafka's `kafka-leader-election.sh`.

`--preferred` moves each partition's leadership to its first replica where that replica is
live and in the ISR; `--unclean` gives a partition with no leader any live replica, accepting
the loss of what only the dead in-sync replicas had. Without `--topic`, every partition. The
output is Kafka's: the partitions elected, those that already had a valid leader, and one line
per failure; the exit status is 1 when any partition failed (a partition that needed no
election is not a failure). `--json` prints one document per partition instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from riverlog.client import ErrorCode
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

from ..connection import add_connection_args, admin_client
from ..console import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, emit, to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("leaders", help="elect partition leaders")
    sub = parser.add_subparsers(dest="leaders_command", required=True, metavar="COMMAND")
    elect = sub.add_parser("elect", help="preferred or unclean leader election")
    kind = elect.add_mutually_exclusive_group(required=True)
    kind.add_argument(
        "--preferred",
        action="store_const",
        const="preferred",
        dest="election_type",
        help="move leadership to the first replica where it is live and in sync",
    )
    kind.add_argument(
        "--unclean",
        action="store_const",
        const="unclean",
        dest="election_type",
        help="give leaderless partitions any live replica (may lose records)",
    )
    elect.add_argument("--topic", help="only this topic (default: every partition)")
    elect.add_argument("--partition", type=int, help="only this partition (needs --topic)")
    elect.add_argument("--json", action="store_true", help="print one JSON document")
    elect.set_defaults(func=run_elect)
    add_connection_args(elect)


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def election_document(
    election_type: str, outcomes: dict[TopicPartition, RiverlogError | None]
) -> dict[str, Any]:
    """What `leaders elect --json` prints."""
    rows = []
    for tp in sorted(outcomes, key=lambda t: (t.topic, t.partition)):
        error = outcomes[tp]
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "error": None if error is None else error.code.name,
                "message": None if error is None else error.message,
            }
        )
    return {"election_type": election_type, "partitions": rows}


def election_text(document: dict[str, Any]) -> str:
    """Kafka's `kafka-leader-election.sh` report."""
    kind = document["election_type"].upper()
    rows = document["partitions"]
    done = [f"{r['topic']}-{r['partition']}" for r in rows if r["error"] is None]
    valid = [
        f"{r['topic']}-{r['partition']}"
        for r in rows
        if r["error"] == ErrorCode.ELECTION_NOT_NEEDED.name
    ]
    failed = [r for r in rows if r["error"] not in (None, ErrorCode.ELECTION_NOT_NEEDED.name)]
    lines = []
    if done:
        lines.append(
            f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}"
        )
    if valid:
        lines.append(f"Valid replica already elected for partitions {', '.join(valid)}")
    if failed:
        lines.append(f"Error completing leader election ({kind}) for partitions:")
        lines.extend(f"{r['topic']}-{r['partition']}: {r['error']}: {r['message']}" for r in failed)
    if not rows:
        lines.append("No partitions to elect.")
    return "\n".join(lines)


def run_elect(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise CliError("--partition needs --topic", EXIT_USAGE)
    with admin_client(args) as admin:
        partitions: list[TopicPartition] | None = None
        if args.topic is not None:
            if args.partition is not None:
                partitions = [TopicPartition(args.topic, args.partition)]
            else:
                topic = admin.describe_topics([args.topic])[args.topic]
                partitions = [TopicPartition(args.topic, p.partition) for p in topic.partitions]
        outcomes = admin.elect_leaders(args.election_type, partitions)
    document = election_document(args.election_type, outcomes)
    emit(to_json(document) if args.json else election_text(document))
    failed = [
        _name(tp)
        for tp, e in outcomes.items()
        if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED
    ]
    if failed:
        print(f"riverlog: election failed for {', '.join(sorted(failed))}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
