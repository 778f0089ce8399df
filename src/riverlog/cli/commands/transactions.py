"""`riverlog transactions list | describe | abort`: the transaction coordinators' view of
transactional ids, as Kafka's `kafka-transactions.sh` (`list` with `--state` filters, `describe
--transactional-id`). `--json` prints one document instead of tables.

`abort --transactional-id ID` ends what that id left open, by fencing it (Kafka's
Admin.fenceProducers, KIP-618): InitProducerId as a new producer with that id would, so the
coordinator bumps the epoch, aborts an ongoing transaction (one already PrepareCommit completes:
its commit was decided) and the producer that held the id fails with PRODUCER_FENCED on its next
call. An id with nothing open is left alone (no fence) unless `--fence` is given. Kafka's
partition-level `abort --topic --partition --start-offset` (a marker for a hanging transaction
the coordinator does not know) is not provided: here every transaction's partitions are in its
coordinator's state, which aborts them."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

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


OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


def run_abort(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with admin_client(args) as admin:
        before = admin.describe_transactions([tid]).get(tid)
        if before is None:
            raise CliError(f"no answer for transactional id {tid!r}")
        if isinstance(before, RiverlogError):
            raise CliError(f"transactional id {tid!r}: {before}")
        if before.state not in OPEN_STATES and not args.fence:
            document: dict[str, Any] = {
                "transactional_id": tid,
                "state_before": before.state,
                "fenced": False,
            }
            emit(to_json(document) if args.json else f"{tid}: no open transaction "
                 f"({before.state}); nothing done (--fence to fence it anyway)")  # fmt: skip
            return EXIT_OK
        fenced = admin.fence_producers([tid])[tid]
        if isinstance(fenced, RiverlogError):
            raise CliError(f"transactional id {tid!r}: {fenced}")
        after = admin.describe_transactions([tid]).get(tid)
    state_after = after.state if after is not None and not isinstance(after, RiverlogError) else "?"
    partitions = [f"{tp.topic}-{tp.partition}" for tp in before.partitions]
    outcome = "committed" if before.state == "PrepareCommit" else "aborted"
    document = {
        "transactional_id": tid,
        "state_before": before.state,
        "partitions": partitions,
        "outcome": outcome if before.state in OPEN_STATES else "none",
        "fenced": True,
        "producer_id": fenced.producer_id,
        "producer_epoch": fenced.producer_epoch,
        "state_after": state_after,
    }
    if args.json:
        emit(to_json(document))
        return EXIT_OK
    emit(
        fields(
            {
                "TransactionalId": tid,
                "StateBefore": before.state,
                "Partitions": ",".join(partitions) or "-",
                "Outcome": document["outcome"],
                "ProducerId": fenced.producer_id,
                "FencedAtEpoch": fenced.producer_epoch,
                "StateAfter": state_after,
            }
        )
    )
    return EXIT_OK
