"""`riverlog topics create | list | describe | delete | alter`: topic administration through the
SDK's AdminClient, as Kafka's `kafka-topics.sh` (and `kafka-configs.sh` for `alter`).

`describe` prints Kafka's layout — one `Topic: ... PartitionCount ... Configs` line, then one
`Partition: ... Leader ... LeaderEpoch ... Replicas ... Isr` line per partition, flagged
`UnderReplicated` (ISR smaller than the replicas) or `Offline` (no leader) — or, with `--json`,
one document with the same facts. Each partition also shows its size (issue 15, decision
0040): `Size` (the leader's bytes on local disk), `RemoteSize` (in the remote tier; 0 when the
topic is not tiered), `LogStart` and `LocalLogStart` (the first offset still on local disk), read
from the leader's storage node with DescribeLogDirs; they are left out, with a note on stderr,
when the caller may not describe the cluster or the leader did not answer.
`--under-replicated-partitions` and
`--unavailable-partitions` keep only such partitions, as Kafka's filters. Every refusal by
the cluster (TOPIC_ALREADY_EXISTS, INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, ...) is one line
on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from riverlog.client import ErrorCode, LogDirs, NewTopic, RiverlogError, TopicDescription
from riverlog.client.admin import AdminClient, ConfigEntry
from riverlog.common.types import TopicPartition

from ..connection import add_connection_args, admin_client, key_value
from ..console import EXIT_OK, EXIT_USAGE, CliError, configs_text, emit, fields, to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe, alter, delete topics")
    sub = parser.add_subparsers(dest="topics_command", required=True, metavar="COMMAND")

    create = sub.add_parser("create", help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    create.add_argument(
        "--config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config by its Kafka name; repeatable",
    )
    create.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    create.add_argument("--validate-only", action="store_true", help="check, create nothing")
    create.set_defaults(func=run_create)

    listing = sub.add_parser("list", help="list topic names")
    listing.add_argument("--include-internal", action="store_true")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(func=run_list)

    describe = sub.add_parser("describe", help="partitions, leaders, replicas, ISR, configs")
    describe.add_argument("names", nargs="*", metavar="NAME", help="default: every topic")
    describe.add_argument("--include-internal", action="store_true")
    describe.add_argument("--all-configs", action="store_true", help="defaults included")
    describe.add_argument("--json", action="store_true", help="print one JSON document")
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replicas",
    )
    describe.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions with no leader",
    )
    describe.set_defaults(func=run_describe)

    delete = sub.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--if-exists", action="store_true", help="no error if it is absent")
    delete.set_defaults(func=run_delete)

    alter = sub.add_parser("alter", help="change a topic's configs or partition count")
    alter.add_argument("name", metavar="NAME")
    alter.add_argument(
        "--config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config; repeatable",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="back to the default; repeatable",
    )
    alter.add_argument("--partitions", type=int, help="grow to this many partitions")
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    alter.set_defaults(func=run_alter)

    for command in (create, listing, describe, delete, alter):
        add_connection_args(command)


def _note(message: str) -> None:
    print(message, file=sys.stderr)


def run_create(args: argparse.Namespace) -> int:
    topic = NewTopic(args.name, args.partitions, args.replication_factor, dict(args.config))
    with admin_client(args) as admin:
        outcome = admin.create_topics(
            [topic], validate_only=args.validate_only, raise_on_error=False
        )[args.name]
    if outcome is not None:
        if args.if_not_exists and outcome.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            _note(f"Topic {args.name} already exists.")
            return EXIT_OK
        raise outcome
    _note(f"{'Validated' if args.validate_only else 'Created'} topic {args.name}.")
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        names = admin.list_topics(include_internal=args.include_internal)
    if args.json:
        emit(to_json(names))
    elif names:
        emit("\n".join(names))
    return EXIT_OK


def topic_json(
    topic: TopicDescription,
    all_configs: dict[str, ConfigEntry] | None = None,
    log_dirs: LogDirs | None = None,
) -> dict[str, Any]:
    """One topic as `topics describe --json` prints it (with each partition's sizes and log
    starts from its leader's replica in `log_dirs`, null where unknown)."""
    configs = (
        {name: entry.value for name, entry in sorted(all_configs.items())}
        if all_configs is not None
        else dict(sorted(topic.configs.items()))
    )
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "internal": topic.internal,
        "partition_count": len(topic.partitions),
        "replication_factor": len(topic.partitions[0].replicas) if topic.partitions else 0,
        "configs": configs,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "under_replicated": len(p.isr) < len(p.replicas),
                "offline": p.leader < 0,
                **_leader_log(log_dirs, TopicPartition(topic.name, p.partition), p.leader),
            }
            for p in topic.partitions
        ],
    }


SIZE_FIELDS = (
    ("size_bytes", "Size"),
    ("remote_size_bytes", "RemoteSize"),
    ("log_start_offset", "LogStart"),
    ("local_log_start_offset", "LocalLogStart"),
)


def _leader_log(log_dirs: LogDirs | None, tp: TopicPartition, leader: int) -> dict[str, Any]:
    """The leader replica's sizes and log starts (None each when unknown)."""
    info = log_dirs.replicas(tp).get(leader) if log_dirs is not None else None
    return {key: getattr(info, key) if info is not None else None for key, _ in SIZE_FIELDS}


def partition_logs(admin: AdminClient, names: list[str]) -> LogDirs | None:
    """The replicas of `names` on every storage node, or None (noted on stderr) when the
    cluster refuses or cannot say: the sizes are extra, the description stands without them."""
    if not names:
        return None
    try:
        return admin.describe_log_dirs(names, raise_on_error=False)
    except RiverlogError as exc:
        _note(f"Partition sizes unavailable: {exc.code.name}: {exc.message}")
        return None


def keep_partitions(
    document: dict[str, Any], under_replicated: bool, unavailable: bool
) -> dict[str, Any]:
    """The document with only the partitions the filters ask for (all without a filter; with
    both, those matching either, as Kafka's tool)."""
    if not (under_replicated or unavailable):
        return document
    kept = [
        p
        for p in document["partitions"]
        if (under_replicated and p["under_replicated"]) or (unavailable and p["offline"])
    ]
    return {**document, "partitions": kept}


def topic_text(document: dict[str, Any], header: bool = True) -> str:
    """Kafka's `kafka-topics.sh --describe` layout for one topic document (without the topic
    line when filtering partitions, as Kafka's tool)."""
    head = {
        "Topic": document["name"],
        "TopicId": document["topic_id"],
        "PartitionCount": document["partition_count"],
        "ReplicationFactor": document["replication_factor"],
        "Configs": configs_text(document["configs"]),
    }
    lines = [fields(head)] if header else []
    for p in document["partitions"]:
        row = {
            "Topic": document["name"],
            "Partition": p["partition"],
            "Leader": p["leader"] if p["leader"] >= 0 else "none",
            "LeaderEpoch": p["leader_epoch"],
            "Replicas": p["replicas"],
            "Isr": p["isr"],
        }
        for key, name in SIZE_FIELDS:
            if p.get(key) is not None:
                row[name] = p[key]
        for key, name in (
            ("adding_replicas", "Adding Replicas"),
            ("removing_replicas", "Removing Replicas"),
        ):
            if p.get(key):
                row[name] = p[key]
        flags = [
            name
            for name, on in (("Offline", p["offline"]), ("UnderReplicated", p["under_replicated"]))
            if on
        ]
        line = fields(row, indent="\t")
        lines.append(f"{line}\t{' '.join(flags)}" if flags else line)
    return "\n".join(lines)


def run_describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        topics = admin.describe_topics(args.names or None, include_internal=args.include_internal)
        configs = admin.describe_configs(sorted(topics)) if args.all_configs and topics else {}
        order = args.names or sorted(topics)
        logs = partition_logs(admin, list(order))
    documents = [
        topic_json(topics[n], configs.get(n) if args.all_configs else None, logs) for n in order
    ]
    filters = (args.under_replicated_partitions, args.unavailable_partitions)
    if any(filters):
        documents = [keep_partitions(d, *filters) for d in documents]
        documents = [d for d in documents if d["partitions"]]
    if args.json:
        emit(to_json(documents))
    elif documents:
        emit("\n".join(topic_text(d, header=not any(filters)) for d in documents))
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        outcome = admin.delete_topics([args.name], raise_on_error=False).get(args.name)
    if outcome is not None:
        if args.if_exists and outcome.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            _note(f"Topic {args.name} does not exist.")
            return EXIT_OK
        raise outcome
    _note(f"Deleted topic {args.name}.")
    return EXIT_OK


def run_alter(args: argparse.Namespace) -> int:
    changes: dict[str, object] = dict(args.config)
    for key in args.delete_config:
        if key in changes:
            raise CliError(f"{key} is both set (--config) and deleted (--delete-config)", 2)
        changes[key] = None
    if not changes and args.partitions is None:
        raise CliError(
            "nothing to change: give --config, --delete-config or --partitions", EXIT_USAGE
        )
    with admin_client(args) as admin:
        if args.partitions is not None:
            admin.create_partitions({args.name: args.partitions}, validate_only=args.validate_only)
        if changes:
            outcome = admin.alter_configs(
                {args.name: changes}, validate_only=args.validate_only, raise_on_error=False
            ).get(args.name)
            if outcome is not None:
                raise outcome
    _note(f"{'Validated' if args.validate_only else 'Updated'} topic {args.name}.")
    return EXIT_OK
