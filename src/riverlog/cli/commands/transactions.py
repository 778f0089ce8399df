"""`riverlog transactions list | describe | abort`: the transaction coordinators' view of
transactional ids, as Kafka's `kafka-transactions.sh` (`list` with `--state` filters, `describe
--transactional-id`). `--json` prints one document instead of tables.

`abort --transactional-id ID` is the operator's abort of a hanging transaction (the
coordinator's AbortTransaction, decision 0031): an Ongoing transaction is fenced and aborted as
transaction.timeout.ms would do it, and the producer that held the id fails with PRODUCER_FENCED
on its next call; one already ending is waited for; an id with nothing open is left alone
unless `--fence` is given, which then fences it as a new producer would (Kafka's
Admin.fenceProducers, KIP-618). Kafka's partition-level `abort --topic --partition
--start-offset` (a marker for a hanging transaction the coordinator does not know) is not
provided: here every transaction's partitions are in its coordinator's state."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from riverlog.client.transaction_admin import FencedProducer
from riverlog.common.errors import RiverlogError

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, CliError, emit, fields, table, to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("transactions", help="list, describe and abort transactions")
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

    abort = sub.add_parser("abort", help="fence a transactional id and abort its open transaction")
    abort.add_argument("--transactional-id", required=True, metavar="ID")
    abort.add_argument(
        "--fence", action="store_true", help="fence the id even with no transaction open"
    )
    abort.add_argument("--json", action="store_true", help="print one JSON document")
    add_connection_args(abort)
    abort.set_defaults(func=run_abort)


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


def run_abort(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with admin_client(args) as admin:
        before = admin.describe_transactions([tid]).get(tid)
        if isinstance(before, RiverlogError):
            raise CliError(f"transactional id {tid!r}: {before}")
        try:
            aborted = admin.abort_transaction(tid)
        except RiverlogError as e:
            raise CliError(f"transactional id {tid!r}: {e}") from None
        fenced: FencedProducer | None = None
        if aborted.previous_state != "Ongoing" and args.fence:
            found = admin.fence_producers([tid])[tid]
            if isinstance(found, RiverlogError):
                raise CliError(f"transactional id {tid!r}: {found}")
            fenced = found
    was_open = aborted.previous_state == "Ongoing"
    partitions = [f"{tp.topic}-{tp.partition}" for tp in before.partitions] if before else []
    document = {
        "transactional_id": tid,
        "previous_state": aborted.previous_state,
        "outcome": "aborted" if was_open else "nothing open",
        "partitions": partitions if was_open else [],
        "fenced": was_open or fenced is not None,
        "producer_id": fenced.producer_id if fenced else aborted.producer_id,
        "producer_epoch": fenced.producer_epoch if fenced else aborted.producer_epoch,
    }
    if args.json:
        emit(to_json(document))
        return EXIT_OK
    if not document["fenced"]:
        emit(f"{tid}: no open transaction ({aborted.previous_state}); nothing done "
             "(--fence to fence the id anyway)")  # fmt: skip
        return EXIT_OK
    emit(
        fields(
            {
                "TransactionalId": tid,
                "PreviousState": aborted.previous_state,
                "Outcome": document["outcome"],
                "Partitions": ",".join(document["partitions"]) or "-",
                "ProducerId": document["producer_id"],
                "FencedAtEpoch": document["producer_epoch"],
            }
        )
    )
    return EXIT_OK
