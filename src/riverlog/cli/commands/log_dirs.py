"""`riverlog log-dirs describe`: every storage node's log dirs and the size of each replica in
them, as Kafka's `kafka-log-dirs.sh --describe` (same options, `--topic-list` and
`--broker-list`, and the same JSON document), through the SDK's `describe_log_dirs`.

Kafka's document gains Riverlog's tiered-storage fields per replica (`remoteSize`,
`logStartOffset`, `localLogStartOffset`, `logEndOffset`) and, per broker, `error` for a node that
did not answer (named on stderr too; the others are still printed, exit status 0). A topic of
`--topic-list` that does not exist is a refusal: one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from riverlog.client import LogDirs, RiverlogError

from ..connection import add_connection_args, admin_client
from ..console import EXIT_OK, emit, to_json


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated topic names, got {text!r}")
    return names


def _ids(text: str) -> list[int]:
    try:
        return [int(i) for i in text.split(",") if i.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated node ids, got {text!r}"
        ) from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log-dirs", help="storage nodes' log dirs and replica sizes (kafka-log-dirs.sh)"
    )
    sub = parser.add_subparsers(dest="log_dirs_command", required=True, metavar="COMMAND")
    describe = sub.add_parser(
        "describe",
        help="each node's log dirs with the size of every replica in them, as JSON",
    )
    describe.add_argument(
        "--topic-list",
        type=_names,
        metavar="T1,T2",
        help="only the replicas of these topics (default: every topic)",
    )
    describe.add_argument(
        "--broker-list",
        type=_ids,
        metavar="1,2",
        help="only these storage nodes (default: every storage node)",
    )
    describe.set_defaults(func=run_describe)
    add_connection_args(describe)


def _error(error: RiverlogError | None) -> str | None:
    return None if error is None else f"{error.code.name}: {error.message}"


def log_dirs_json(result: LogDirs) -> dict[str, Any]:
    """Kafka's `kafka-log-dirs.sh` document (version 1) with Riverlog's fields."""
    brokers: list[dict[str, Any]] = []
    for node_id in sorted({*result.nodes, *result.node_errors}):
        dirs = result.nodes.get(node_id, {})
        brokers.append(
            {
                "broker": node_id,
                "error": _error(result.node_errors.get(node_id)),
                "logDirs": [
                    {
                        "logDir": path,
                        "error": _error(d.error),
                        "partitions": [
                            {
                                "partition": f"{tp.topic}-{tp.partition}",
                                "size": info.size_bytes,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                                "remoteSize": info.remote_size_bytes,
                                "logStartOffset": info.log_start_offset,
                                "localLogStartOffset": info.local_log_start_offset,
                                "logEndOffset": info.log_end_offset,
                            }
                            for tp, info in sorted(d.replica_infos.items())
                        ],
                    }
                    for path, d in sorted(dirs.items())
                ],
            }
        )
    return {"version": 1, "brokers": brokers}


def run_describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        result = admin.describe_log_dirs(args.topic_list, args.broker_list)
    if result.nodes:
        received = ",".join(str(n) for n in sorted(result.nodes))
        print(f"Received log directory information from brokers {received}", file=sys.stderr)
    for node_id, error in sorted(result.node_errors.items()):
        print(f"No answer from broker {node_id}: {_error(error)}", file=sys.stderr)
    emit(to_json(log_dirs_json(result)))
    return EXIT_OK
