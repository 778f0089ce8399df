"""`riverlog cluster start | stop | restart KIND N`, `cluster add KIND [--rack R]` and `cluster
remove KIND N`: changing a running local cluster one process at a time (issue 13 item 3; the
steps are `riverlog.cluster.shape`'s).

`remove storage N` drains the node first, as one would before retiring a Kafka broker
(`node_drain.py`): N is marked as draining so nothing new lands on it, every partition with a
replica on N is reassigned (KIP-455, through the AdminClient) to other live storage nodes
that are not draining, keeping its replication factor (throttled with `--throttle`), the
command waits until no partition names N, and only then stops the node; its clean stop
unregisters it and the controller drops the mark. It is refused, with nothing moved, when the
other live nodes cannot hold some partition's replication factor. `--json` prints the moves.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from riverlog.cluster import ClusterNotFoundError, LocalCluster
from riverlog.cluster.errors import ClusterError
from riverlog.cluster.local import SERVICE_ROLES
from riverlog.cluster.shape import (
    ADDABLE_ROLES,
    REMOVABLE_ROLES,
    add_process,
    forget_process,
    process_of,
    remove_process,
    restart_process,
    resume,
    shape_lock,
    start_process,
    stop_process,
)

from ..connection import add_connection_args, admin_client, default_data_dir
from ..console import EXIT_OK, EXIT_USAGE, CliError, emit, to_json
from .drain_plan import DrainError
from .node_drain import DrainResult, drain, report


def register(sub: Any) -> None:
    """Add the subcommands to `riverlog cluster`'s subparsers."""
    data_dir_help = "the cluster's data directory (default: $RIVERLOG_HOME or ~/.riverlog)"
    for name, text in (
        ("start", "start a stopped or crashed process again (same id, data and ports)"),
        ("stop", "stop one process by its PID (SIGTERM, SIGKILL after --grace)"),
        ("restart", "stop then start one process"),
    ):
        parser = sub.add_parser(name, help=text)
        parser.add_argument("kind", choices=SERVICE_ROLES)
        parser.add_argument("node_id", type=int, metavar="N")
        _common(parser, data_dir_help)
        parser.set_defaults(func=run_lifecycle, action=name)

    add = sub.add_parser("add", help="start a new process with the next node id")
    add.add_argument("kind", choices=ADDABLE_ROLES)
    add.add_argument("--rack", help="the new storage node's rack")
    _common(add, data_dir_help)
    add.set_defaults(func=run_add)

    remove = sub.add_parser(
        "remove", help="stop a process for good (a storage node is drained first)"
    )
    remove.add_argument("kind", choices=("storage", *REMOVABLE_ROLES))
    remove.add_argument("node_id", type=int, metavar="N")
    remove.add_argument(
        "--drain-timeout", type=float, default=600.0, help="seconds the drain may take"
    )
    remove.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_S",
        help="storage: throttle the drain's replication to this rate (removed when done)",
    )
    remove.add_argument("--json", action="store_true", help="print one JSON document")
    _common(remove, data_dir_help)
    add_connection_args(remove)
    remove.set_defaults(func=run_remove)


def _common(parser: argparse.ArgumentParser, data_dir_help: str) -> None:
    parser.add_argument("--data-dir", type=Path, help=data_dir_help)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ready")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds before SIGKILL")


@contextmanager
def _attached(args: argparse.Namespace) -> Iterator[LocalCluster]:
    """The cluster from its state file, read and changed under its shape lock."""
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    if not data_dir.is_dir():
        raise CliError(f"no local cluster in {data_dir} (start one: riverlog cluster up)")
    with shape_lock(data_dir.resolve()):
        try:
            cluster = LocalCluster.attach(data_dir)
        except ClusterNotFoundError:
            raise CliError(
                f"no local cluster in {data_dir} (start one: riverlog cluster up)"
            ) from None
        yield cluster


def run_lifecycle(args: argparse.Namespace) -> int:
    name = f"{args.kind}-{args.node_id}"
    with _attached(args) as cluster:
        return _lifecycle(cluster, args, name)


def _lifecycle(cluster: LocalCluster, args: argparse.Namespace, name: str) -> int:
    try:
        if args.action == "stop":
            stopped = stop_process(cluster, args.kind, args.node_id, args.grace)
            print(f"{name} {'stopped' if stopped else 'was not running'}", file=sys.stderr)
            return EXIT_OK
        if args.action == "start":
            proc = start_process(cluster, args.kind, args.node_id, args.timeout)
        else:
            proc = restart_process(cluster, args.kind, args.node_id, args.timeout, args.grace)
    except (ClusterError, KeyError) as e:
        raise CliError(str(e)) from None
    print(f"{name} running (pid {proc.pid}) at {proc.address}", file=sys.stderr)
    return EXIT_OK


def run_add(args: argparse.Namespace) -> int:
    try:
        with _attached(args) as cluster:
            proc = add_process(cluster, args.kind, args.rack, args.timeout)
    except ClusterError as e:
        raise CliError(str(e)) from None
    print(f"{proc.name} running (pid {proc.pid}) at {proc.address}", file=sys.stderr)
    if args.kind == "storage":
        print(
            f"node {proc.node_id} holds no partition yet; move some to it with: riverlog "
            f"partitions reassign --generate --topics T --nodes ...,{proc.node_id}",
            file=sys.stderr,
        )
    return EXIT_OK


def run_resume(args: argparse.Namespace) -> int:
    """`riverlog cluster up --resume`."""
    try:
        with _attached(args) as cluster:
            started = resume(cluster, args.timeout)
    except ClusterError as e:
        raise CliError(str(e)) from None
    names = ", ".join(p.name for p in started) or "nothing: every process was running"
    print(f"started {names}", file=sys.stderr)
    emit(cluster.bootstrap_servers or "(no gateway)")
    return EXIT_OK


def run_remove(args: argparse.Namespace) -> int:
    if args.throttle is not None and args.kind != "storage":
        raise CliError("--throttle is for removing a storage node (its drain)", EXIT_USAGE)
    with _attached(args) as cluster:
        drained = _remove(cluster, args)
    name = f"{args.kind}-{args.node_id}"
    if args.json:
        document = drained.document() if drained is not None else {"node": args.node_id}
        emit(to_json({"removed": name, **document}))
    else:
        print(f"{name} stopped and removed from the cluster", file=sys.stderr)
    return EXIT_OK


def _remove(cluster: LocalCluster, args: argparse.Namespace) -> DrainResult | None:
    try:
        if args.kind != "storage":
            remove_process(cluster, args.kind, args.node_id, args.grace)
            return None
        proc = process_of(cluster, "storage", args.node_id)
        if args.bootstrap is None:
            args.bootstrap = cluster.bootstrap_servers or None
        with admin_client(args) as admin:
            result = drain(admin, args.node_id, args.drain_timeout, args.throttle)
        if not args.json:
            report(result)
        forget_process(cluster, proc, args.grace)
        return result
    except (ClusterError, DrainError) as e:
        raise CliError(str(e)) from None
