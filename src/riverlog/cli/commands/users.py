"""`riverlog users add | delete | list`: the users the gateways authenticate, as Kafka's
`kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users`.

The metadata service stores a salted PBKDF2-SHA256 hash, never the password. The new user's
password is `--new-password` or, when absent, read from $RIVERLOG_NEW_PASSWORD or the first
line of stdin (so it need not appear in the shell history). `--new-token` instead generates a
random token (`<user>.<secret>`), prints it once, and stores its hash beside the user's password
and earlier tokens (a user may hold a password and any number of tokens; each token is listed
as `<user>#<token id>` and can be deleted alone by that name, `users delete <user>` deletes the
password and every token): clients send it as `--token` / $RIVERLOG_TOKEN (SDK:
`sasl.oauthbearer.token`). `--user` /
`--password` / `--token` are, as on every command, the caller's own credentials.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from riverlog.common.quota.credentials import new_token, token_slot

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, to_json

NEW_PASSWORD_ENV = "RIVERLOG_NEW_PASSWORD"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("users", help="add, delete, list the users gateways accept")
    sub = parser.add_subparsers(dest="users_command", required=True, metavar="COMMAND")

    add = sub.add_parser("add", help="store a user (or change its password)")
    add.add_argument("name", metavar="NAME")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument("--new-password", help=f"default: ${NEW_PASSWORD_ENV}, else stdin")
    secret.add_argument(
        "--new-token",
        action="store_true",
        help="add a token to the user, print it once (its password and other tokens are kept)",
    )
    add.set_defaults(func=run_add)

    delete = sub.add_parser(
        "delete", help="delete a user (password and tokens), or one token by <user>#<id>"
    )
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(func=run_delete)

    listing = sub.add_parser("list", help="list user names")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(func=run_list)

    for command in (add, delete, listing):
        add_connection_args(command)


def _new_password(args: argparse.Namespace) -> str:
    if args.new_password:
        return str(args.new_password)
    from_env = os.environ.get(NEW_PASSWORD_ENV)
    if from_env:
        return from_env
    if sys.stdin.isatty():
        raise CliError(f"give --new-password, ${NEW_PASSWORD_ENV}, or the password on stdin", 2)
    line = sys.stdin.readline().rstrip("\n")
    if not line:
        raise CliError("empty password on stdin", EXIT_USAGE)
    return line


def run_add(args: argparse.Namespace) -> int:
    token = new_token(args.name) if args.new_token else None
    slot = token_slot(token) if token is not None else None
    with admin_client(args) as admin:
        if token is not None and slot is not None:
            admin.upsert_user(slot, token)  # beside the password and other tokens
        else:
            admin.upsert_user(args.name, _new_password(args))
    if token is not None:
        emit(token)
        print(
            f"Added token {slot} to user {args.name} (shown once; its password and other"
            " tokens are kept).",
            file=sys.stderr,
        )
    else:
        print(f"Stored user {args.name}.", file=sys.stderr)
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        admin.delete_user(args.name)
    print(f"Deleted user {args.name}.", file=sys.stderr)
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        names = admin.list_users()
    if args.json:
        emit(to_json(names))
    elif names:
        emit("\n".join(names))
    return EXIT_OK
