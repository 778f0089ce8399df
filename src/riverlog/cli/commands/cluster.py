"""`riverlog cluster up | status | down`: a local cluster for development, kept in a data
directory (default `$RIVERLOG_HOME` or `~/.riverlog`) by `riverlog.cluster.LocalCluster`.

`up` returns once the gateway reports every storage node live and prints the bootstrap address
on stdout (details on stderr), leaving the processes running in their own sessions. `status`
reads the state file, checks every PID, lists each process's Prometheus `/metrics` URL, and
asks a gateway for the controller and the live nodes. `down` stops every recorded process by
PID. `start | stop | restart | add | remove` change a running cluster one process at a time
(`cluster_shape.py`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from riverlog.cluster import ClusterNotFoundError, LocalCluster
from riverlog.cluster.readiness import describe_cluster
from riverlog.v1 import admin_pb2, common_pb2

from ..connection import DEFAULT_CLIENT_ID, default_data_dir, parse_servers
from ..console import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, describe, emit, table, to_json
from . import cluster_balance, cluster_shape

ROLES = ("metadata", "storage", "gateway")
NODE_KINDS = {
    common_pb2.NODE_KIND_STORAGE: "storage",
    common_pb2.NODE_KIND_GATEWAY: "gateway",
    common_pb2.NODE_KIND_COORDINATOR: "coordinator",
    common_pb2.NODE_KIND_QUOTA: "quota",
    common_pb2.NODE_KIND_METADATA: "metadata",
}
# Subdirectories `cluster up --clean` may delete: only what the launcher itself creates.
OWNED_PATHS = ("cluster.json", "logs", "run", "data", "tls", "direct-access.key")


def role_config(text: str) -> tuple[str, str, str]:
    """argparse type for `ROLE:KEY=VALUE`."""
    role, sep, setting = text.partition(":")
    key, eq, value = setting.partition("=")
    if not sep or role not in ROLES or not eq or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected ROLE:KEY=VALUE with ROLE one of {', '.join(ROLES)}, got {text!r}"
        )
    return role, key.strip(), value.strip()


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster", help="start, inspect and stop a local cluster", description=__doc__
    )
    sub = parser.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    data_dir_help = "where the cluster keeps its state, logs and data (default: $RIVERLOG_HOME"
    data_dir_help += " or ~/.riverlog)"

    up = sub.add_parser("up", help="start etcd, metadata, storage and gateway processes")
    up.add_argument("--data-dir", type=Path, help=data_dir_help)
    up.add_argument("--storage-nodes", type=positive_count, default=3)
    up.add_argument("--metadata-nodes", type=positive_count, default=3)
    up.add_argument("--gateways", type=positive_count, default=1)
    up.add_argument("--quota-nodes", type=positive_count, default=1, help="quota service instances")
    up.add_argument(
        "--coordinators", type=positive_count, default=2, help="group coordinator instances"
    )
    up.add_argument("--etcd", metavar="URL", help="use this etcd instead of starting one")
    up.add_argument("--racks", metavar="R1,R2", help="racks dealt to storage nodes in turn")
    up.add_argument(
        "--config",
        type=role_config,
        action="append",
        default=[],
        metavar="ROLE:KEY=VALUE",
        help="a setting for every process of a role, e.g. storage:log.segment.bytes=1048576",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="encrypt every channel: a throwaway CA and a certificate per process in "
        "<data-dir>/tls, mutual TLS between services, TLS on the gateways",
    )
    up.add_argument(
        "--no-direct-access",
        dest="direct_access",
        action="store_false",
        help="no direct data access: clients produce and fetch through the gateways only "
        "(default: a key in <data-dir>/direct-access.key for every gateway and storage node, "
        "and a direct port on each storage node; never with --tls)",
    )
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for ready")
    start_mode = up.add_mutually_exclusive_group()
    start_mode.add_argument(
        "--clean", action="store_true", help="delete the previous cluster's data"
    )
    start_mode.add_argument(
        "--resume",
        action="store_true",
        help="start the processes the state file records (ids, ports, data): the shape the "
        "cluster had, with nodes added or removed since up; counts and --config are ignored",
    )
    up.set_defaults(func=run_up)

    status = sub.add_parser("status", help="every process, the controller and live nodes")
    status.add_argument("--data-dir", type=Path, help=data_dir_help)
    status.add_argument("--json", action="store_true", help="print one JSON document")
    status.add_argument("--bootstrap", metavar="HOST:PORT", help="ask this gateway instead")
    status.add_argument("--timeout", type=float, default=5.0, help="seconds for the gateway")
    status.add_argument("--client-id", default=DEFAULT_CLIENT_ID, help="sent to the gateway")
    status.set_defaults(func=run_status)

    down = sub.add_parser("down", help="stop every process of the local cluster (by PID)")
    down.add_argument("--data-dir", type=Path, help=data_dir_help)
    down.add_argument("--grace", type=float, default=10.0, help="seconds before SIGKILL")
    down.set_defaults(func=run_down)
    cluster_shape.register(sub)
    cluster_balance.register(sub)


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()


def run_up(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    if args.resume:
        return cluster_shape.run_resume(args)
    if args.metadata_nodes < 1:
        raise CliError("--metadata-nodes must be at least 1", EXIT_USAGE)
    if args.etcd and not args.etcd.startswith(("http://", "https://")):
        raise CliError(f"--etcd expects a URL like http://127.0.0.1:2379, got {args.etcd!r}", 2)
    extra: dict[str, dict[str, str]] = {}
    for role, key, value in args.config:
        extra.setdefault(role, {})[key] = value
    racks = [r.strip() for r in args.racks.split(",") if r.strip()] if args.racks else None
    cluster = LocalCluster(
        data_dir,
        storage_nodes=args.storage_nodes,
        metadata_nodes=args.metadata_nodes,
        gateways=args.gateways,
        quota_nodes=args.quota_nodes,
        coordinators=args.coordinators,
        etcd_url=args.etcd,
        extra_config=extra,
        racks=racks,
        tls=args.tls,
        direct_access=args.direct_access,
    )
    if args.clean:
        _clean(cluster.data_dir)
    print(
        f"starting {args.metadata_nodes} metadata, {args.storage_nodes} storage,"
        f" {args.quota_nodes} quota, {args.coordinators} coordinator"
        f" and {args.gateways} gateway processes"
        f"{' over TLS' if args.tls else ''} in {cluster.data_dir} ...",
        file=sys.stderr,
    )
    cluster.start(timeout=args.timeout)
    print(
        f"cluster is up (logs in {cluster.data_dir / 'logs'}); "
        f"try: riverlog topics list --bootstrap {cluster.gateway_address}",
        file=sys.stderr,
    )
    emit(cluster.bootstrap_servers or "(no gateway)")
    return EXIT_OK


def _clean(data_dir: Path) -> None:
    try:
        previous = LocalCluster.attach(data_dir)
    except ClusterNotFoundError:
        pass
    else:
        if previous.running:
            raise CliError(f"a cluster is running in {data_dir}: `riverlog cluster down` first")
    for name in OWNED_PATHS:
        path = data_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _attach(data_dir: Path) -> LocalCluster:
    try:
        return LocalCluster.attach(data_dir)
    except ClusterNotFoundError:
        raise CliError(f"no local cluster in {data_dir} (start one: riverlog cluster up)") from None


def node_json(node: common_pb2.Node) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "kind": NODE_KINDS.get(node.kind, "unknown"),
        "address": f"{node.host}:{node.port}",
        "rack": node.rack or None,
    }


def cluster_json(response: admin_pb2.DescribeClusterResponse) -> dict[str, Any]:
    return {
        "cluster_id": response.cluster_id,
        "controller_id": response.controller_id,
        "controller_epoch": response.controller_epoch,
        "metadata_version": response.metadata_version,
        "offline_partitions": response.offline_partitions,
        "under_replicated_partitions": response.under_replicated_partitions,
        "metadata_instances": [
            {
                "instance_id": m.instance_id,
                "address": f"{m.host}:{m.port}",
                "is_controller": m.is_controller,
            }
            for m in response.metadata_instances
        ],
        "live_nodes": [
            node_json(n) for n in sorted(response.nodes, key=lambda n: (n.kind, n.node_id))
        ],
    }


def status_document(
    cluster: LocalCluster,
    bootstrap: str | None,
    timeout: float,
    client_id: str = DEFAULT_CLIENT_ID,
) -> dict[str, Any]:
    """What `cluster status --json` prints: processes from the state file and PIDs, and the
    gateway's view (or the error asking it)."""
    processes = [
        {
            "name": p.name,
            "role": p.role,
            "node_id": p.node_id,
            "address": p.address,
            "pid": p.pid,
            "alive": p.alive,
            "metrics": p.metrics_url,
            "log": str(p.log_path),
        }
        for p in cluster.processes.values()
    ]
    etcd = cluster.processes.get("etcd")
    document: dict[str, Any] = {
        "data_dir": str(cluster.data_dir),
        "etcd_url": cluster.layout.etcd_url or (etcd.address if etcd else None),
        "processes": processes,
        "cluster": None,
        "error": None,
    }
    gateways = [p.address for p in cluster.by_role("gateway") if p.alive and p.address]
    target = parse_servers(bootstrap).split(",")[0] if bootstrap else next(iter(gateways), None)
    if target is None:
        document["error"] = "no gateway is running"
        return document
    try:
        document["cluster"] = cluster_json(
            describe_cluster(target, timeout, client_id, cluster.gateway_credentials)
        )
    except Exception as e:  # shown in the status, not raised: the rest is still worth seeing
        document["error"] = f"gateway {target}: {describe(e)[0]}"
    return document


def status_text(document: dict[str, Any]) -> str:
    rows = [
        (p["name"], p["role"], p["node_id"], p["address"], p["pid"], p["alive"], p.get("metrics"))
        for p in document["processes"]
    ]
    lines = [f"Local cluster in {document['data_dir']}"]
    lines.append(table(("name", "role", "node", "address", "pid", "alive", "metrics"), rows))
    view = document["cluster"]
    if view is None:
        lines.append(f"Cluster view unavailable: {document['error']}")
        return "\n".join(lines)
    controller = view["controller_id"]
    epoch = view["controller_epoch"]
    lines.append(f"Cluster id: {view['cluster_id']}")
    lines.append(
        f"Controller: metadata instance {controller} (epoch {epoch})"
        if controller >= 0
        else "Controller: none"
    )
    lines.append(
        f"Partitions: {view.get('offline_partitions', 0)} offline, "
        f"{view.get('under_replicated_partitions', 0)} under-replicated"
    )
    lines.append("Live nodes:")
    node_rows = [(n["kind"], n["node_id"], n["address"], n["rack"]) for n in view["live_nodes"]]
    lines.append(table(("kind", "node", "address", "rack"), node_rows))
    return "\n".join(lines)


def run_status(args: argparse.Namespace) -> int:
    cluster = _attach(_data_dir(args))
    document = status_document(cluster, args.bootstrap, args.timeout, args.client_id)
    emit(to_json(document) if args.json else status_text(document))
    dead = [p["name"] for p in document["processes"] if not p["alive"]]
    if dead:
        what = "the cluster is not running" if len(dead) == len(document["processes"]) else ""
        print(f"riverlog: {what or 'not running: ' + ', '.join(dead)}", file=sys.stderr)
        return EXIT_ERROR
    if document["cluster"] is None:
        print(f"riverlog: {document['error']}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def run_down(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    try:
        cluster = LocalCluster.attach(data_dir)
    except ClusterNotFoundError:
        print(f"no local cluster in {data_dir}: nothing to stop", file=sys.stderr)
        return EXIT_OK
    live = [p for p in cluster.processes.values() if p.alive]
    cluster.stop(grace=args.grace)
    survivors = [f"{p.name} (pid {p.pid})" for p in live if p.alive]
    if survivors:
        raise CliError(f"still running after SIGKILL: {', '.join(survivors)}")
    print(f"stopped {len(live)} processes of the cluster in {cluster.data_dir}", file=sys.stderr)
    return EXIT_OK
