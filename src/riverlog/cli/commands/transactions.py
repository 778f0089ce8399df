"""`riverlog transactions list | describe`: the transaction coordinators' view of transactional
ids, as Kafka's `kafka-transactions.sh` (`list` with `--state` filters, `describe
--transactional-id`). `--json` prints one document instead of tables."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from riverlog.common.errors import RiverlogError

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, CliError, emit, fields, table, to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("transactions", help="list and describe transactions")
    sub = parser.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")

    listing = sub.add_parser("list", help="list transactional ids and their states")
    listing.add_argument("--state", action="append", default=[], help="only ids in STATE")
    listing.add_argument("--producer-id", action="append", type=int, default=[], metavar="ID")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    add_connection_args(listing)
    listing.set_defaults(func=run_list)

    describe = sub.add_parser("describe", help="one transactional id's open transaction")
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    describe.add_argument("--json", action="store_true", help="print one JSON document")
    add_connection_args(describe)
    describe.set_defaults(func=run_describe)


def run_list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        rows = admin.list_transactions(args.state, args.producer_id)
    if args.json:
        emit(to_json([asdict(r) for r in rows]))
    else:
        emit(
            table(
                ["transactional-id", "producer-id", "state"],
                [(r.transactional_id, r.producer_id, r.state) for r in rows],
            )
        )
    return EXIT_OK


def run_describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with admin_client(args) as admin:
        found = admin.describe_transactions([tid]).get(tid)
    if found is None:
        raise CliError(f"no answer for transactional id {tid!r}")
    if isinstance(found, RiverlogError):
        raise CliError(f"transactional id {tid!r}: {found}")
    partitions = [f"{tp.topic}-{tp.partition}" for tp in found.partitions]
    if args.json:
        document = asdict(found)
        document["partitions"] = partitions
        emit(to_json(document))
        return EXIT_OK
    emit(
        fields(
            {
                "TransactionalId": found.transactional_id,
                "State": found.state,
                "ProducerId": found.producer_id,
                "ProducerEpoch": found.producer_epoch,
                "TransactionTimeoutMs": found.timeout_ms,
                "TransactionStartTimeMs": found.start_time_ms,
                "Partitions": ",".join(partitions) or "-",
            }
        )
    )
    return EXIT_OK
