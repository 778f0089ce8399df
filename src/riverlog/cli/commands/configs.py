"""`riverlog configs alter | describe`: dynamic configs as Kafka's `kafka-configs.sh`, for
storage nodes (`--entity-type brokers`) and topics (`--entity-type topics`).

- `alter --entity-type brokers --entity-name 2 --add-config
  leader.replication.throttled.rate=1048576` sets a node's config; `--entity-default` instead
  of `--entity-name` sets the cluster-wide default (a node's own value wins);
  `--delete-config K1,K2` removes keys. `--add-config` takes Kafka's `k1=v1,k2=[v,with,commas]`
  (square brackets keep a list value together) and may be repeated.
- `describe --entity-type brokers [--entity-name N | --entity-default]` shows the configs set on
  one entity, or on every entity with something set; `--all` adds the defaults.
  `--entity-type topics --entity-name T` does the same for a topic.

Storage nodes apply a node's replication throttle rates at once (decision 0024). A refused
change (an unknown key, a negative or non-numeric rate: INVALID_CONFIG) changes nothing and
is one line on stderr with status 1. `--json` prints one document.
"""

from __future__ import annotations

import argparse
from typing import Any

from riverlog.client import AdminClient
from riverlog.client.node_config_admin import ConfigEntry, NodeEntity

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, table, to_json

ENTITY_TYPES = ("brokers", "topics")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("configs", help="alter and describe node and topic configs")
    sub = parser.add_subparsers(dest="configs_command", required=True, metavar="COMMAND")
    alter = sub.add_parser("alter", help="add or delete configs of one entity")
    _entity_args(alter)
    alter.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="configs to set (Kafka's syntax; [a,b] keeps a list value together)",
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="configs to remove"
    )
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    alter.set_defaults(func=run_alter)
    describe = sub.add_parser("describe", help="show the configs of entities")
    _entity_args(describe)
    describe.add_argument("--all", action="store_true", help="include the defaults")
    describe.add_argument("--json", action="store_true", help="print one JSON document")
    describe.set_defaults(func=run_describe)
    for command in (alter, describe):
        add_connection_args(command)


def _entity_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--entity-name", metavar="NAME", help="a storage node id or a topic")
    which.add_argument(
        "--entity-default", action="store_true", help="brokers: the cluster-wide default"
    )


def parse_add_config(values: list[str]) -> dict[str, str]:
    """Kafka's `--add-config` syntax: `k1=v1,k2=[a,b]`; raises CliError on a malformed item."""
    out: dict[str, str] = {}
    for text in values:
        for item in _split_top_level(text):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"--add-config: expected KEY=VALUE, got {item!r}", EXIT_USAGE)
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside square brackets."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item for item in items if item.strip()]


def _node_entity(args: argparse.Namespace) -> NodeEntity:
    if args.entity_default:
        return None
    if args.entity_name is None:
        raise CliError("give --entity-name N or --entity-default", EXIT_USAGE)
    try:
        node = int(args.entity_name)
    except ValueError:
        raise CliError(f"--entity-name {args.entity_name!r} is not a node id", EXIT_USAGE) from None
    if node < 0:
        raise CliError(f"--entity-name {node} is not a node id", EXIT_USAGE)
    return node


def _label(node: NodeEntity) -> str:
    return "<default>" if node is None else str(node)


def run_alter(args: argparse.Namespace) -> int:
    changes: dict[str, object] = dict(parse_add_config(args.add_config))
    for text in args.delete_config:
        for key in (k.strip() for k in text.split(",") if k.strip()):
            if key in changes:
                raise CliError(f"{key} is both added and deleted", EXIT_USAGE)
            changes[key] = None
    if not changes:
        raise CliError("nothing to change: give --add-config or --delete-config", EXIT_USAGE)
    with admin_client(args) as admin:
        if args.entity_type == "brokers":
            node = _node_entity(args)
            outcome = admin.alter_node_configs(
                {node: changes}, validate_only=args.validate_only, raise_on_error=False
            ).get(node)
            what = f"broker {_label(node)}" if node is not None else "the default broker"
        else:
            topic = _topic(args)
            outcome = admin.alter_configs(
                {topic: changes}, validate_only=args.validate_only, raise_on_error=False
            ).get(topic)
            what = f"topic {topic}"
    if outcome is not None:
        raise outcome
    verb = "Validated" if args.validate_only else "Completed updating"
    emit(f"{verb} config for {what}.")
    return EXIT_OK


def _topic(args: argparse.Namespace) -> str:
    if args.entity_default or not args.entity_name:
        raise CliError("topics need --entity-name TOPIC", EXIT_USAGE)
    name: str = args.entity_name
    return name


def _described(admin: AdminClient, args: argparse.Namespace) -> list[tuple[str, list[ConfigEntry]]]:
    if args.entity_type == "topics":
        topic = _topic(args)
        entries = admin.describe_configs([topic])[topic]
        return [(topic, list(entries.values()))]
    if args.entity_default or args.entity_name is not None:
        node = _node_entity(args)
        found = admin.describe_node_configs([node])
        return [(_label(node), list(found.get(node, {}).values()))]
    everything = admin.describe_node_configs(all_nodes=True)
    return [(_label(n), list(entries.values())) for n, entries in everything.items()]


def run_describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        described = _described(admin, args)
    rows = [
        (name, [e for e in entries if args.all or not e.is_default]) for name, entries in described
    ]
    if args.json:
        emit(
            to_json(
                {
                    "entities": [
                        {
                            "entity_type": args.entity_type,
                            "entity_name": name,
                            "configs": [
                                {"name": e.name, "value": e.value, "is_default": e.is_default}
                                for e in entries
                            ],
                        }
                        for name, entries in rows
                    ]
                }
            )
        )
        return EXIT_OK
    kind = "broker" if args.entity_type == "brokers" else "topic"
    blocks = []
    for name, entries in rows:
        header = f"Configs for {kind} {name} are:"
        if not entries:
            blocks.append(f"{header}\n  (none set)")
            continue
        body = table(
            ["NAME", "VALUE", "SOURCE"],
            [(e.name, e.value, "default" if e.is_default else "dynamic") for e in entries],
        )
        blocks.append(f"{header}\n{body}")
    emit("\n\n".join(blocks) if blocks else f"No {kind} has dynamic configs set.")
    return EXIT_OK
