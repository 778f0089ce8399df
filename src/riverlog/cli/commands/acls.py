"""`riverlog acls add | list | remove`: Kafka's `kafka-acls.sh --add | --list | --remove`.

Options are kafka-acls.sh's: principals (`--allow-principal User:alice`, `--deny-principal`,
repeatable), hosts (`--allow-host`, `--deny-host`, default `*`), operations (`--operation
Read`, repeatable, default All), resources (`--topic`, `--group`, `--transactional-id`,
repeatable, `--cluster`) and `--resource-pattern-type` (LITERAL or PREFIXED to add; also ANY
or MATCH to list and remove; default LITERAL to add, ANY otherwise). The conveniences:
`--producer` (WRITE, DESCRIBE and CREATE on the topics, with `--idempotent` IDEMPOTENT_WRITE on
the cluster, with `--transactional-id` WRITE and DESCRIBE on it) and `--consumer` (READ and
DESCRIBE on the topics, READ on the `--group`). `remove` without principals removes every
binding of the named resources; `list` filters by resource and `--principal`. `--json` prints
the bindings as a JSON array. The caller needs ALTER (add, remove) or DESCRIBE (list) on the
cluster once any ACL exists.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from riverlog.common.acl.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_principal,
)
from riverlog.common.errors import RiverlogError

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, to_json

_OPERATIONS = [o.name for o in AclOperation if o != AclOperation.ANY]


def _operation(text: str) -> AclOperation:
    """argparse type: Kafka's operation names in any case (`Read`, `DescribeConfigs`,
    `DESCRIBE_CONFIGS`)."""
    folded = text.replace("_", "").replace("-", "").upper()
    for op in AclOperation:
        if op.name.replace("_", "") == folded and op != AclOperation.ANY:
            return op
    raise argparse.ArgumentTypeError(
        f"unknown operation {text!r} (one of {', '.join(_OPERATIONS)})"
    )


def _pattern_type(text: str) -> PatternType:
    try:
        return PatternType[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown pattern type {text!r} (LITERAL, PREFIXED, ANY, MATCH)"
        ) from None


def _resource_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resources")
    group.add_argument("--topic", action="append", default=[], metavar="NAME")
    group.add_argument("--group", action="append", default=[], metavar="NAME")
    group.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    group.add_argument("--cluster", action="store_true", help="the cluster resource")
    group.add_argument(
        "--resource-pattern-type",
        type=_pattern_type,
        metavar="TYPE",
        help="LITERAL or PREFIXED (add); also ANY or MATCH (list, remove)",
    )


def _entry_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("access")
    group.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
    group.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
    group.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    group.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    group.add_argument("--operation", type=_operation, action="append", default=[], metavar="OP")
    group.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    group.add_argument("--idempotent", action="store_true", help="with --producer")
    group.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("acls", help="add, list, remove ACLs (kafka-acls.sh)")
    sub = parser.add_subparsers(dest="acls_command", required=True, metavar="COMMAND")

    add = sub.add_parser("add", help="add ACL bindings")
    _resource_args(add)
    _entry_args(add)
    add.set_defaults(func=run_add)

    listing = sub.add_parser("list", help="list ACL bindings (all, or of the named resources)")
    _resource_args(listing)
    listing.add_argument("--principal", action="append", default=[], metavar="User:NAME")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(func=run_list)

    remove = sub.add_parser("remove", help="remove ACL bindings")
    _resource_args(remove)
    _entry_args(remove)
    remove.set_defaults(func=run_remove)

    for command in (add, listing, remove):
        add_connection_args(command)


def resources(args: argparse.Namespace, default: PatternType) -> list[ResourcePattern]:
    """The resource patterns the options name."""
    ptype = args.resource_pattern_type or default
    out = [ResourcePattern(ResourceType.TOPIC, t, ptype) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, ptype) for g in args.group]
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, ptype) for t in args.transactional_id]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def _ops_by_resource(
    args: argparse.Namespace, patterns: list[ResourcePattern]
) -> list[tuple[ResourcePattern, list[AclOperation]]]:
    """(pattern, operations) pairs: `--operation` on every named resource, or the
    `--producer` / `--consumer` sets as kafka-acls.sh."""
    if not (args.producer or args.consumer):
        ops = args.operation or [AclOperation.ALL]
        return [(p, ops) for p in patterns]
    if args.operation:
        raise CliError("--operation does not go with --producer / --consumer", EXIT_USAGE)
    topics = [p for p in patterns if p.resource_type == ResourceType.TOPIC]
    if not topics:
        raise CliError("--producer / --consumer need --topic", EXIT_USAGE)
    out: list[tuple[ResourcePattern, list[AclOperation]]] = []
    Op = AclOperation
    if args.producer:
        out += [(t, [Op.WRITE, Op.DESCRIBE, Op.CREATE]) for t in topics]
        txns = [p for p in patterns if p.resource_type == ResourceType.TRANSACTIONAL_ID]
        out += [(t, [Op.WRITE, Op.DESCRIBE]) for t in txns]
        if args.idempotent:
            cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
            out.append((cluster, [Op.IDEMPOTENT_WRITE]))
    if args.consumer:
        groups = [p for p in patterns if p.resource_type == ResourceType.GROUP]
        if not groups:
            raise CliError("--consumer needs --group", EXIT_USAGE)
        out += [(t, [Op.READ, Op.DESCRIBE]) for t in topics]
        out += [(g, [Op.READ]) for g in groups]
    return out


def _principals(names: list[str]) -> list[str]:
    for name in names:
        try:
            validate_principal(name)
        except RiverlogError as exc:
            raise CliError(exc.message, EXIT_USAGE) from None
    return names


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    """The bindings `add` (and an exact `remove`) means; CliError on incomplete options."""
    patterns = resources(args, PatternType.LITERAL)
    if not patterns:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster", 2)
    entries = [
        (p, h or "*", AclPermission.ALLOW)
        for p, h in itertools.product(_principals(args.allow_principal), args.allow_host or ["*"])
    ] + [
        (p, h or "*", AclPermission.DENY)
        for p, h in itertools.product(_principals(args.deny_principal), args.deny_host or ["*"])
    ]
    if not entries:
        raise CliError("name a principal: --allow-principal or --deny-principal", EXIT_USAGE)
    return [
        AclBinding(pattern, AccessControlEntry(principal, host, op, permission))
        for pattern, ops in _ops_by_resource(args, patterns)
        for principal, host, permission in entries
        for op in ops
    ]


def _label(b: AclBinding) -> str:
    e = b.entry
    return (
        f"\t(principal={e.principal}, host={e.host}, operation={e.operation.name},"
        f" permissionType={e.permission.name})"
    )


def _print(found: list[AclBinding], as_json: bool) -> None:
    if as_json:
        emit(
            to_json(
                [
                    {
                        "resource_type": b.pattern.resource_type.name,
                        "resource_name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type.name,
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": b.entry.operation.name,
                        "permission_type": b.entry.permission.name,
                    }
                    for b in found
                ]
            )
        )
        return
    lines: list[str] = []
    for pattern, group in itertools.groupby(found, key=lambda b: b.pattern):
        p = pattern
        lines.append(
            f"Current ACLs for resource `ResourcePattern(resourceType={p.resource_type.name},"
            f" name={p.name}, patternType={p.pattern_type.name})`:"
        )
        lines.extend(_label(b) for b in group)
        lines.append("")
    if lines:
        emit("\n".join(lines).rstrip("\n"))


def run_add(args: argparse.Namespace) -> int:
    if args.resource_pattern_type in (PatternType.ANY, PatternType.MATCH):
        raise CliError("add takes --resource-pattern-type LITERAL or PREFIXED", EXIT_USAGE)
    chosen = bindings(args)
    with admin_client(args) as admin:
        admin.create_acls(chosen)
    emit("Adding ACLs:\n" + "\n".join(f"{b.pattern}: {_label(b).strip()}" for b in chosen))
    return EXIT_OK


def _or_any(principals: list[str]) -> list[str | None]:
    return list(principals) if principals else [None]


def _filters(args: argparse.Namespace, principals: list[str]) -> list[AclBindingFilter]:
    patterns = resources(args, PatternType.ANY)
    if not patterns:
        return [AclBindingFilter(principal=p) for p in principals] or [AclBindingFilter()]
    return [
        AclBindingFilter(p.resource_type, p.name, p.pattern_type, principal)
        for p in patterns
        for principal in _or_any(principals)
    ]


def run_list(args: argparse.Namespace) -> int:
    found: list[AclBinding] = []
    with admin_client(args) as admin:
        for f in _filters(args, _principals(args.principal)):
            found.extend(b for b in admin.describe_acls(f) if b not in found)
    _print(sorted(found, key=str), args.json)
    return EXIT_OK


def run_remove(args: argparse.Namespace) -> int:
    if args.allow_principal or args.deny_principal:
        exact = bindings(args)
        filters = [
            AclBindingFilter(
                b.pattern.resource_type,
                b.pattern.name,
                b.pattern.pattern_type,
                b.entry.principal,
                b.entry.host,
                b.entry.operation,
                b.entry.permission,
            )
            for b in exact
        ]
    else:
        if not resources(args, PatternType.ANY):
            raise CliError("name a resource to remove the ACLs of", EXIT_USAGE)
        filters = _filters(args, [])
    with admin_client(args) as admin:
        deleted = admin.delete_acls(filters)
    gone = sorted({b for rows in deleted for b in rows}, key=str)
    emit(f"Removed {len(gone)} ACL binding(s).")
    _print(gone, as_json=False)
    return EXIT_OK
