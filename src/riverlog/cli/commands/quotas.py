"""`riverlog quotas set | describe | delete`: client quotas per (user, client-id), as Kafka's
`kafka-configs.sh --alter --entity-type users --entity-name U --add-config ...`.

The entity is `--user U` and/or `--client-id C`, or their defaults `--user-default` /
`--client-id-default` (Kafka's `--entity-default`), giving Kafka's eight levels, for instance
`--user alice --client-id-default` is /config/users/alice/clients/<default>. Values:
`--producer-byte-rate N`, `--consumer-byte-rate N`, `--request-percentage P` (or any key with
`--config KEY=VALUE`). `delete` removes the named keys, or all three when none is named.
`describe` lists the configured entities matching the given parts (all without any). Because
`--user` and `--client-id` name the entity here, the caller's own identity is `--auth-user`
(with `--password`) and `--auth-client-id`. Refusals (negative values, unknown keys, a user
that was never added) are one line on stderr and status 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from riverlog.common.quota.entity import DEFAULT, QuotaEntity

from ..connection import add_connection_args, admin_client, key_value
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, table, to_json

_KEYS = (
    ("producer_byte_rate", "--producer-byte-rate"),
    ("consumer_byte_rate", "--consumer-byte-rate"),
    ("request_percentage", "--request-percentage"),
)


def _entity_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("quota entity")
    user = group.add_mutually_exclusive_group()
    user.add_argument("--user", dest="entity_user", metavar="USER", help="a user principal")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = group.add_mutually_exclusive_group()
    client.add_argument("--client-id", dest="entity_client_id", metavar="ID", help="a client id")
    client.add_argument("--client-id-default", action="store_true", help="the default client")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("quotas", help="set, describe, delete client quotas")
    sub = parser.add_subparsers(dest="quotas_command", required=True, metavar="COMMAND")

    setter = sub.add_parser("set", help="set quota values of an entity")
    _entity_args(setter)
    for key, flag in _KEYS:
        setter.add_argument(flag, dest=key, type=float, metavar="N", help=f"{key}")
    setter.add_argument(
        "--config", type=key_value, action="append", default=[], metavar="KEY=VALUE"
    )
    setter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    setter.set_defaults(func=run_set)

    describe = sub.add_parser("describe", help="configured quotas (filtered by entity parts)")
    _entity_args(describe)
    describe.add_argument("--json", action="store_true", help="print one JSON document")
    describe.set_defaults(func=run_describe)

    delete = sub.add_parser("delete", help="remove quota keys of an entity")
    _entity_args(delete)
    for key, flag in _KEYS:
        delete.add_argument(flag, dest=key, action="store_const", const=0.0, help=f"{key}")
    delete.set_defaults(func=run_delete)

    for command in (setter, describe, delete):
        add_connection_args(command, entity_options=True)


def _user(args: argparse.Namespace) -> str | None:
    return DEFAULT if args.user_default else args.entity_user


def _client(args: argparse.Namespace) -> str | None:
    return DEFAULT if args.client_id_default else args.entity_client_id


def entity_of(args: argparse.Namespace) -> QuotaEntity:
    user, client = _user(args), _client(args)
    if user is None and client is None:
        raise CliError(
            "name the quota entity: --user U / --user-default and/or --client-id C /"
            " --client-id-default",
            EXIT_USAGE,
        )
    return QuotaEntity(user, client)


def entity_text(entity: QuotaEntity) -> str:
    parts = []
    if entity.user is not None:
        parts.append(f"user={entity.user}")
    if entity.client_id is not None:
        parts.append(f"client-id={entity.client_id}")
    return ",".join(parts)


def number(value: float) -> str:
    """A quota value as typed: whole numbers without a fraction or exponent."""
    return str(int(value)) if value.is_integer() else f"{value:g}"


def _values(args: argparse.Namespace) -> dict[str, float]:
    values = {key: getattr(args, key) for key, _ in _KEYS if getattr(args, key) is not None}
    for key, raw in getattr(args, "config", []):
        try:
            values[key] = float(raw)
        except ValueError:
            raise CliError(f"{key}: expected a number, got {raw!r}", EXIT_USAGE) from None
    return values


def run_set(args: argparse.Namespace) -> int:
    entity = entity_of(args)
    values = _values(args)
    if not values:
        raise CliError("nothing to set: give --producer-byte-rate, ... or --config", EXIT_USAGE)
    changes: dict[str, float | None] = dict(values)
    with admin_client(args) as admin:
        admin.alter_client_quotas([(entity, changes)], validate_only=args.validate_only)
    verb = "Validated" if args.validate_only else "Set"
    shown = ", ".join(f"{k}={number(v)}" for k, v in sorted(values.items()))
    print(f"{verb} {shown} for {entity_text(entity)} ({entity.path}).", file=sys.stderr)
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    entity = entity_of(args)
    keys = [key for key, _ in _KEYS if getattr(args, key) is not None] or [k for k, _ in _KEYS]
    with admin_client(args) as admin:
        admin.alter_client_quotas([(entity, dict.fromkeys(keys))])
    print(f"Removed {', '.join(keys)} for {entity_text(entity)}.", file=sys.stderr)
    return EXIT_OK


def run_describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        found = admin.describe_client_quotas(_user(args), _client(args))
    rows = sorted(found.items(), key=lambda kv: kv[0].path)
    if args.json:
        emit(
            to_json(
                [
                    {
                        "user": e.user,
                        "client_id": e.client_id,
                        "path": e.path,
                        "values": dict(sorted(v.items())),
                    }
                    for e, v in rows
                ]
            )
        )
    elif rows:
        emit(
            table(
                ["ENTITY", "PATH", "QUOTAS"],
                [
                    (
                        entity_text(e),
                        e.path,
                        ",".join(f"{k}={number(x)}" for k, x in sorted(v.items())),
                    )
                    for e, v in rows
                ],
            )
        )
    return EXIT_OK
