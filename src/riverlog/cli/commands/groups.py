"""`riverlog groups list | describe | reset-offsets | delete`: consumer-group administration
through the SDK's AdminClient, as Kafka's `kafka-consumer-groups.sh`.

`describe` prints the group (state, protocol, generation, leader), its members (ids, instance
ids, client ids, hosts, assignments), then one line per partition the group has an offset for
or is assigned: committed offset, log end offset, lag and owner — Kafka's `--describe` columns.
`reset-offsets` shows its plan (current and new offset per partition) and changes nothing
unless `--execute` is given; like Kafka's tool it refuses groups with active members (the state
must be Empty, or the group unknown). `--json` prints one document instead of tables.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from riverlog.client import AdminClient, TopicPartition
from riverlog.client.group_admin import GroupDescription

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, CliError, emit, fields, table, to_json

EARLIEST = -2
LATEST = -1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("groups", help="list, describe, reset offsets of, delete groups")
    sub = parser.add_subparsers(dest="groups_command", required=True, metavar="COMMAND")

    listing = sub.add_parser("list", help="list consumer groups")
    listing.add_argument("--state", action="append", default=[], help="only groups in STATE")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    add_connection_args(listing)
    listing.set_defaults(func=run_list)

    describe = sub.add_parser("describe", help="members, assignments, offsets and lag")
    describe.add_argument("group", metavar="GROUP")
    describe.add_argument("--json", action="store_true", help="print one JSON document")
    describe.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: the log end offset is the last stable offset, and the lag is "
        "what a read_committed member can still read",
    )
    add_connection_args(describe)
    describe.set_defaults(func=run_describe)

    reset = sub.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument("--topic", required=True, metavar="TOPIC")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start")
    how.add_argument("--to-latest", action="store_true", help="the log end")
    how.add_argument("--to-datetime", metavar="ISO", help="first record at/after this time")
    how.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be negative)")
    reset.add_argument("--execute", action="store_true", help="apply (default: show the plan)")
    reset.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_connection_args(reset)
    reset.set_defaults(func=run_reset)

    delete = sub.add_parser("delete", help="delete an empty group and its offsets")
    delete.add_argument("group", metavar="GROUP")
    add_connection_args(delete)
    delete.set_defaults(func=run_delete)


# ---- list -------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        groups = admin.list_groups(args.state)
    if args.json:
        emit(
            to_json(
                [
                    {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                    for g in groups
                ]
            )
        )
    else:
        emit(
            table(
                ["group", "state", "protocol-type"],
                [(g.group_id, g.state, g.protocol_type or "-") for g in groups],
            )
        )
    return EXIT_OK


# ---- describe ---------------------------------------------------------------------------


def describe_document(
    group: GroupDescription,
    committed: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
) -> dict[str, Any]:
    """The facts `describe` shows, as plain data (tables and JSON are both made from it)."""
    owners = {tp: m for m in group.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owners))
    rows = []
    for tp in partitions:
        offset = committed.get(tp)
        end = ends.get(tp)
        owner = owners.get(tp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": offset,
                "log_end_offset": end,
                "lag": None if offset is None or end is None else max(end - offset, 0),
                "member_id": owner.member_id if owner else None,
                "host": owner.host if owner else None,
                "client_id": owner.client_id if owner else None,
            }
        )
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "generation": group.generation_id,
        "leader": group.leader,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [str(tp) for tp in m.assignment],
            }
            for m in group.members
        ],
        "partitions": rows,
    }


def describe_text(doc: dict[str, Any]) -> str:
    head = fields(
        {
            "Group": doc["group"],
            "State": doc["state"],
            "Protocol": doc["protocol"] or None,
            "Generation": doc["generation"],
            "Leader": doc["leader"] or None,
            "Members": len(doc["members"]),
            **(
                {"Isolation": "read_committed (log-end-offset: the last stable offset)"}
                if doc.get("isolation_level") == "read_committed"
                else {}
            ),
        }
    )
    members = table(
        ["member-id", "instance-id", "client-id", "host", "assignment"],
        [
            (m["member_id"], m["group_instance_id"], m["client_id"], m["host"], m["assignment"])
            for m in doc["members"]
        ],
    )
    keys = [
        "topic",
        "partition",
        "current_offset",
        "log_end_offset",
        "lag",
        "member_id",
        "host",
        "client_id",
    ]
    partitions = table(
        [k.replace("_", "-") for k in keys], [[row[k] for k in keys] for row in doc["partitions"]]
    )
    return f"{head}\n\n{members}\n\n{partitions}"


def log_end_offsets(
    admin: AdminClient, tps: list[TopicPartition], read_committed: bool = False
) -> dict[TopicPartition, int]:
    """The high watermarks, or the last stable offsets (ListOffsets under read_committed)."""
    if not tps:
        return {}
    found = admin.list_offsets(dict.fromkeys(tps, LATEST), read_committed=read_committed)
    return {tp: hit.offset for tp, hit in found.items() if hit is not None}


def run_describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        group = admin.describe_groups([args.group])[args.group]
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(args.group).items()}
        assigned = {tp for m in group.members for tp in m.assignment}
        read_committed = args.isolation_level == "read_committed"
        ends = log_end_offsets(admin, sorted(set(committed) | assigned), read_committed)
    doc = describe_document(group, committed, ends)
    doc["isolation_level"] = args.isolation_level
    if group.state == "Dead" and not committed:
        raise CliError(f"consumer group {args.group!r} does not exist")
    emit(to_json(doc) if args.json else describe_text(doc))
    return EXIT_OK


# ---- reset-offsets ----------------------------------------------------------------------


def parse_datetime(text: str) -> int:
    """ISO 8601 (a naive time is UTC) → milliseconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--to-datetime: not an ISO 8601 time: {text!r}", 2) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def reset_plan(
    args: argparse.Namespace,
    tps: list[TopicPartition],
    committed: dict[TopicPartition, int],
    admin: AdminClient,
) -> dict[TopicPartition, int]:
    """The new offset of each partition of the topic, clamped to the log."""
    earliest = {
        tp: hit.offset
        for tp, hit in admin.list_offsets(dict.fromkeys(tps, EARLIEST)).items()
        if hit
    }
    latest = {
        tp: hit.offset for tp, hit in admin.list_offsets(dict.fromkeys(tps, LATEST)).items() if hit
    }
    plan: dict[TopicPartition, int] = {}
    for tp in tps:
        lo, hi = earliest.get(tp, 0), latest.get(tp, 0)
        if args.to_earliest:
            target = lo
        elif args.to_latest:
            target = hi
        elif args.shift_by is not None:
            target = committed.get(tp, lo) + args.shift_by
        else:
            target = hi
        plan[tp] = min(max(target, lo), hi)
    if args.to_datetime is not None:
        ts = parse_datetime(args.to_datetime)
        found = admin.list_offsets(dict.fromkeys(tps, ts))
        for tp, hit in found.items():
            if hit is not None:
                plan[tp] = hit.offset
    return plan


def run_reset(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        group = admin.describe_groups([args.group])[args.group]
        if group.state not in ("Empty", "Dead"):
            raise CliError(
                f"consumer group {args.group!r} is {group.state} with {len(group.members)} "
                "member(s): offsets can only be reset when the group is inactive (Empty)"
            )
        topic = admin.describe_topics([args.topic])[args.topic]
        tps = [TopicPartition(args.topic, p.partition) for p in topic.partitions]
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(args.group, tps).items()}
        plan = reset_plan(args, tps, committed, admin)
        if args.execute:
            admin.alter_group_offsets(args.group, plan)
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": committed.get(tp),
            "new_offset": offset,
        }
        for tp, offset in sorted(plan.items())
    ]
    if args.json:
        emit(to_json({"group": args.group, "executed": bool(args.execute), "partitions": rows}))
    else:
        keys = ["topic", "partition", "current_offset", "new_offset"]
        emit(
            table(
                ["group", *[k.replace("_", "-") for k in keys]],
                [[args.group, *[r[k] for k in keys]] for r in rows],
            )
        )
    if not args.execute:
        print("(dry run: nothing changed; pass --execute to apply)", file=sys.stderr)
    return EXIT_OK


# ---- delete -----------------------------------------------------------------------------


def run_delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        admin.delete_groups([args.group])
    emit(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return EXIT_OK
