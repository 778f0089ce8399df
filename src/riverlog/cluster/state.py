"""The cluster state file `<data-dir>/cluster.json`: how a `riverlog cluster status` or `down`
run from another process finds what `cluster up` started.

Format (JSON, version 1): the layout the cluster was started with (`storage_nodes`,
`metadata_nodes`, `gateways`, `extra_config`, `racks`, `tls`, `direct_access`), `etcd_url` and
whether etcd is `external`, and `processes`: one object per process with `name`, `role`,
`node_id`, `pid`, `address`, `args` (the command line as configured, ports 0), `launched_args`
(as last run), `log_path`, `ready_file`, `health_url` and `info` (the ready file's JSON).
Written atomically (temp file + rename) after every start, restart and stop.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ClusterError, ClusterNotFoundError
from .process import ManagedProcess, ProcessSpec

STATE_FILE = "cluster.json"
STATE_VERSION = 1


@dataclass(slots=True)
class ClusterLayout:
    """How many of each process, with which settings: what `LocalCluster` was asked for."""

    storage_nodes: int = 3
    metadata_nodes: int = 3
    gateways: int = 1
    quota_nodes: int = 0
    coordinators: int = 0
    etcd_url: str | None = None  # an external etcd; None: the cluster starts its own
    extra_config: dict[str, dict[str, str]] = field(default_factory=dict)
    racks: list[str] | None = None
    log_dirs_per_node: int = 1  # storage log.dirs (Kafka's JBOD): storage-N, storage-N-dir2...
    tls: bool = False  # every channel over TLS, certificates in <data-dir>/tls (decision 0035)
    # Direct data access (decision 0047): a key in <data-dir>/direct-access.key for every
    # gateway and storage node (not under tls: the direct ports are plaintext)
    direct_access: bool = True


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def process_to_json(proc: ManagedProcess) -> dict[str, Any]:
    spec = proc.spec
    return {
        "name": spec.name,
        "role": spec.role,
        "node_id": spec.node_id,
        "pid": proc.pid,
        "address": proc.address,
        "args": list(spec.args),
        "launched_args": list(proc.launched_args),
        "log_path": str(spec.log_path),
        "ready_file": str(spec.ready_file) if spec.ready_file else None,
        "health_url": spec.health_url,
        "env": dict(spec.env),
        "wrapper": list(spec.wrapper),
        "info": proc.info,
    }


def process_from_json(data: Mapping[str, Any]) -> ManagedProcess:
    spec = ProcessSpec(
        name=str(data["name"]),
        role=str(data["role"]),
        node_id=None if data.get("node_id") is None else int(data["node_id"]),
        args=tuple(str(a) for a in data["args"]),
        log_path=Path(data["log_path"]),
        ready_file=Path(data["ready_file"]) if data.get("ready_file") else None,
        health_url=data.get("health_url"),
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        wrapper=tuple(str(a) for a in data.get("wrapper") or ()),
    )
    launched = data.get("launched_args")
    return ManagedProcess(
        spec,
        pid=None if data.get("pid") is None else int(data["pid"]),
        info=dict(data.get("info") or {}),
        launched_args=tuple(str(a) for a in launched) if launched else None,
    )


def write_state(
    data_dir: Path, layout: ClusterLayout, etcd_url: str | None, procs: Iterable[ManagedProcess]
) -> Path:
    """Write the state file atomically; returns its path."""
    path = state_path(data_dir)
    document = {
        "version": STATE_VERSION,
        "data_dir": str(data_dir),
        "etcd_url": etcd_url,
        "external_etcd": layout.etcd_url is not None,
        "storage_nodes": layout.storage_nodes,
        "metadata_nodes": layout.metadata_nodes,
        "gateways": layout.gateways,
        "quota_nodes": layout.quota_nodes,
        "coordinators": layout.coordinators,
        "extra_config": layout.extra_config,
        "racks": layout.racks,
        "log_dirs_per_node": layout.log_dirs_per_node,
        "tls": layout.tls,
        "direct_access": layout.direct_access,
        "processes": [process_to_json(p) for p in procs],
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_state(data_dir: Path) -> tuple[ClusterLayout, str | None, list[ManagedProcess]]:
    """(layout, etcd URL, processes) from the state file; raises ClusterNotFoundError when
    there is none and ClusterError when it cannot be read."""
    path = state_path(data_dir)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ClusterNotFoundError(f"no local cluster in {data_dir} (no {STATE_FILE})") from None
    except (OSError, ValueError) as e:
        raise ClusterError(f"cannot read {path}: {e}") from None
    if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
        raise ClusterError(f"{path} is not a version {STATE_VERSION} cluster state file")
    try:
        layout = ClusterLayout(
            storage_nodes=int(document["storage_nodes"]),
            metadata_nodes=int(document["metadata_nodes"]),
            gateways=int(document["gateways"]),
            quota_nodes=int(document.get("quota_nodes", 0)),
            coordinators=int(document.get("coordinators", 0)),
            etcd_url=document["etcd_url"] if document.get("external_etcd") else None,
            extra_config={
                str(role): {str(k): str(v) for k, v in values.items()}
                for role, values in (document.get("extra_config") or {}).items()
            },
            racks=list(document["racks"]) if document.get("racks") else None,
            log_dirs_per_node=int(document.get("log_dirs_per_node", 1)),
            tls=bool(document.get("tls", False)),
            direct_access=bool(document.get("direct_access", True)),
        )
        procs = [process_from_json(p) for p in document["processes"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ClusterError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    return layout, document.get("etcd_url"), procs
