"""A whole Riverlog cluster on this machine, as real processes on loopback: etcd, metadata
instances, storage nodes, group coordinators (`coordinators`, none unless asked for; the CLI's
`cluster up` starts two), quota instances (`quota_nodes`, none unless asked for; the CLI's
`cluster up` starts one) and gateways, each started by module name (`python -m
riverlog.services.<role>`), never imported. Tests, benchmarks and `riverlog cluster up` use it;
fault tests reach single processes through `processes` to kill, pause or restart them.

Layout of the data directory: `cluster.json` (the state file, see `state.py`), `logs/<name>.log`
(one per process, appended across restarts), `run/<name>.ready` (ready files), `data/etcd` and
`data/storage-<id>` (etcd's data and each storage node's log dir), `direct-access.key` (the
cluster's direct-access key, mode 0600, decision 0047). Node ids start at 1.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import grpc

from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.grants import new_key
from riverlog.common.rpc.channel import tls_channel_credentials
from riverlog.common.rpc.tls import InternalTls
from riverlog.v1 import admin_pb2, common_pb2

from .certs import ClusterCertificates
from .errors import ClusterError
from .etcd import etcd_ports, etcd_spec
from .placement import LOOPBACK, Placement
from .process import ManagedProcess, ProcessSpec
from .readiness import (
    ClusterView,
    describe_cluster,
    gateway_channel_credentials,
    wait_for_storage_nodes,
)
from .state import ClusterLayout, read_state, state_path, write_state
from .topics import create_topic

METRICS_PORT = "metrics.prometheus.port"
SERVICE_ROLES = ("metadata", "storage", "quota", "coordinator", "gateway")
START_ORDER = ("etcd", *SERVICE_ROLES)
STOP_ORDER = tuple(reversed(START_ORDER))
DEFAULT_START_TIMEOUT = 120.0
LOCALHOST = "127.0.0.1"
LAUNCHER_CERTIFICATE = "launcher"
# The metadata service's etcd client TLS settings (services/metadata/config.py; the launcher
# imports no service).
ETCD_SSL_CA = "metadata.etcd.ssl.ca.location"
ETCD_SSL_CERTIFICATE = "metadata.etcd.ssl.certificate.location"
ETCD_SSL_KEY = "metadata.etcd.ssl.key.location"
DIRECT_ACCESS_KEY_FILE = "direct-access.key"
DIRECT_ACCESS_KEY_SETTING = "direct.access.secret.key.file"


class LocalCluster:
    """A local cluster rooted at `data_dir`.

    Lifecycle: `start(timeout)` → use → `stop()` (also as a context manager). One thread drives
    it. `LocalCluster.attach(data_dir)` rebuilds one started elsewhere from its state file, to
    inspect or stop it. `extra_config` maps a role ("metadata", "storage", "gateway") to
    settings passed as `--config key=value`; `racks` are dealt to storage nodes in turn;
    each storage node gets `log_dirs_per_node` log dirs (`log_dirs(node_id)`).
    `metrics`: every service serves Prometheus `/metrics` on a free port (`metrics_url` of
    each process). `service_modules` (role → module run with `python -m`) and `env` (added to
    each service's environment) exist for the launcher's own tests. `placement` says where each
    process runs (default: all on 127.0.0.1; fault tests give each its own network namespace
    and address). With `tls` every channel is encrypted (decision 0035): a throwaway CA and a
    certificate per process in `data_dir/tls/` (`certificates`), mutual TLS between services,
    and TLS on the gateways' client listener (`client_tls_config` says how an SDK client
    reaches them). With `direct_access` (the default; not with `tls`) every gateway and storage
    node gets the cluster's direct-access key (`direct-access.key` in the data dir, made once)
    and each storage node a direct port: SDK clients then produce and fetch at the leaders
    themselves under grants (decision 0047).
    """

    def __init__(
        self,
        data_dir: Path | str,
        storage_nodes: int = 3,
        metadata_nodes: int = 3,
        gateways: int = 1,
        etcd_url: str | None = None,
        extra_config: Mapping[str, Mapping[str, str]] | None = None,
        racks: Sequence[str] | None = None,
        *,
        quota_nodes: int = 0,
        coordinators: int = 0,
        python: str | None = None,
        service_modules: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        placement: Placement | None = None,
        log_dirs_per_node: int = 1,
        tls: bool = False,
        metrics: bool = True,
        direct_access: bool = True,
    ) -> None:
        if log_dirs_per_node < 1:
            raise ValueError("a storage node needs at least one log dir")
        if min(storage_nodes, gateways, quota_nodes, coordinators) < 0 or metadata_nodes < 1:
            raise ValueError("need at least one metadata instance; counts cannot be negative")
        unknown = set(extra_config or {}) - set(SERVICE_ROLES)
        if unknown:
            raise ValueError(f"extra_config roles must be among {SERVICE_ROLES}: {unknown}")
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.layout = ClusterLayout(
            storage_nodes=storage_nodes,
            metadata_nodes=metadata_nodes,
            gateways=gateways,
            quota_nodes=quota_nodes,
            coordinators=coordinators,
            etcd_url=etcd_url,
            extra_config={r: dict(c) for r, c in (extra_config or {}).items()},
            racks=list(racks) if racks else None,
            log_dirs_per_node=log_dirs_per_node,
            tls=tls,
            direct_access=direct_access,
        )
        self.python = python or sys.executable
        self.service_modules = {r: f"riverlog.services.{r}" for r in SERVICE_ROLES}
        self.service_modules.update(service_modules or {})
        self.env = dict(env or {})
        self.placement: Placement = placement or LOOPBACK
        self.metrics = metrics
        self.processes: dict[str, ManagedProcess] = {}
        self._etcd_url = etcd_url
        self._previous_etcd_ports: tuple[int | None, int | None] = (None, None)

    @classmethod
    def attach(cls, data_dir: Path | str) -> LocalCluster:
        """The cluster recorded in `data_dir/cluster.json` (started by another process).
        Raises ClusterNotFoundError when there is none."""
        path = Path(data_dir).expanduser().resolve()
        layout, etcd_url, procs = read_state(path)
        cluster = cls(
            path,
            storage_nodes=layout.storage_nodes,
            metadata_nodes=layout.metadata_nodes,
            gateways=layout.gateways,
            etcd_url=layout.etcd_url,
            extra_config=layout.extra_config,
            racks=layout.racks,
            quota_nodes=layout.quota_nodes,
            coordinators=layout.coordinators,
            log_dirs_per_node=layout.log_dirs_per_node,
            tls=layout.tls,
            direct_access=layout.direct_access,
        )
        cluster._etcd_url = etcd_url
        for proc in procs:
            proc.on_change = cluster.save_state
            cluster.processes[proc.name] = proc
        return cluster

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def etcd_url(self) -> str:
        if self._etcd_url is None:
            raise ClusterError("etcd is not started")
        return self._etcd_url

    def by_role(self, role: str) -> list[ManagedProcess]:
        """The processes of one role, by node id."""
        found = [p for p in self.processes.values() if p.role == role]
        return sorted(found, key=lambda p: p.node_id or 0)

    def _addresses(self, role: str) -> list[str]:
        return [p.address for p in self.by_role(role) if p.address is not None]

    @property
    def metadata_addresses(self) -> list[str]:
        return self._addresses("metadata")

    @property
    def storage_addresses(self) -> list[str]:
        return self._addresses("storage")

    @property
    def gateway_addresses(self) -> list[str]:
        return self._addresses("gateway")

    @property
    def gateway_address(self) -> str:
        """The first gateway's `host:port`: what clients bootstrap from."""
        addresses = self.gateway_addresses
        if not addresses:
            raise ClusterError("the cluster has no gateway running")
        return addresses[0]

    @property
    def bootstrap_servers(self) -> str:
        """Every gateway, comma-separated (Kafka's `bootstrap.servers` form)."""
        return ",".join(self.gateway_addresses)

    def _one(self, role: str, node_id: int) -> ManagedProcess:
        name = f"{role}-{node_id}"
        if name not in self.processes:
            raise KeyError(f"no {name} in this cluster")
        return self.processes[name]

    def metadata(self, instance_id: int) -> ManagedProcess:
        return self._one("metadata", instance_id)

    def storage(self, node_id: int) -> ManagedProcess:
        return self._one("storage", node_id)

    def gateway(self, node_id: int) -> ManagedProcess:
        return self._one("gateway", node_id)

    def quota(self, node_id: int) -> ManagedProcess:
        return self._one("quota", node_id)

    def coordinator(self, node_id: int) -> ManagedProcess:
        return self._one("coordinator", node_id)

    @property
    def coordinator_addresses(self) -> list[str]:
        return self._addresses("coordinator")

    @property
    def running(self) -> bool:
        """True while any of its processes is alive."""
        return any(p.alive for p in self.processes.values())

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> LocalCluster:
        """Start etcd, the metadata instances, the storage nodes, the quota instances and the
        gateways, in that order, each tier in parallel; then wait until every gateway reports
        every storage node live. On any failure everything started is stopped and
        ClusterError raised."""
        deadline = time.monotonic() + timeout
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_if_running()
        try:
            for role in START_ORDER:
                self._start_tier(role, deadline)
                self.save_state()
            try:
                self.wait_ready(max(1.0, deadline - time.monotonic()))
            except ClusterError as e:
                raise ClusterError(f"{e} (logs in {self.data_dir / 'logs'})") from None
        except BaseException:
            self.stop(grace=5.0)
            raise
        return self

    def _refuse_if_running(self) -> None:
        if any(p.alive for p in self.processes.values()):
            raise ClusterError(f"cluster in {self.data_dir} is already started")
        if not state_path(self.data_dir).exists():
            return
        previous = LocalCluster.attach(self.data_dir)
        live = [f"{p.name} (pid {p.pid})" for p in previous.processes.values() if p.alive]
        if live:
            raise ClusterError(
                f"a cluster is already running in {self.data_dir}: {', '.join(live)}; "
                "stop it first (riverlog cluster down)"
            )
        if "etcd" in previous.processes and self.layout.etcd_url is None:
            # Ask for the same etcd ports again, so the URL stays the one etcd's data knows.
            self._previous_etcd_ports = etcd_ports(previous.processes["etcd"].spec.args)

    def _start_tier(self, role: str, deadline: float) -> None:
        if role == "etcd":
            if self.layout.etcd_url is not None:
                return
            self._start_etcd(deadline)
            return
        procs = [self._add(spec) for spec in self._specs(role)]
        for proc in procs:
            proc.spawn()
        for proc in procs:
            proc.wait_ready(max(0.1, deadline - time.monotonic()))

    def _start_etcd(self, deadline: float) -> None:
        client, peer = self._previous_etcd_ports
        for attempt in range(3):
            spec = etcd_spec(
                self.data_dir / "data" / "etcd",
                self._log("etcd"),
                client,
                peer,
                host=self.placement.host("etcd"),
                private_address=self.placement.private_ports,
                wrapper=self.placement.wrapper("etcd"),
                tls=self._etcd_tls(),
            )
            proc = self._add(spec)
            try:
                proc.start(max(0.1, deadline - time.monotonic()))
            except ClusterError:
                retry = not (proc.alive or attempt == 2 or self.placement.private_ports)
                if not retry or time.monotonic() >= deadline:  # private: ports were not it
                    raise
                client = peer = None  # a port was taken between choosing and binding: retry
                continue
            self._etcd_url = spec.health_url.rsplit("/", 1)[0] if spec.health_url else None
            return

    def _etcd_tls(self) -> CertificateFiles | None:
        """Under `tls`, the certificate etcd serves its clients with (it requires theirs)."""
        if not self.layout.tls:
            return None
        host = self.placement.host("etcd")
        paths = self.certificates.for_process("etcd", [host, LOCALHOST, "localhost"])
        return CertificateFiles(str(paths.certificate), str(paths.key), str(paths.ca))

    def _add(self, spec: ProcessSpec) -> ManagedProcess:
        proc = ManagedProcess(spec, on_change=self.save_state)
        self.processes[spec.name] = proc
        return proc

    def _log(self, name: str) -> Path:
        return self.data_dir / "logs" / f"{name}.log"

    def _specs(self, role: str) -> list[ProcessSpec]:
        count = {
            "metadata": self.layout.metadata_nodes,
            "storage": self.layout.storage_nodes,
            "gateway": self.layout.gateways,
            "quota": self.layout.quota_nodes,
            "coordinator": self.layout.coordinators,
        }[role]
        return [self.service_spec(role, node_id) for node_id in range(1, count + 1)]

    def log_dirs(self, node_id: int) -> list[Path]:
        """Storage node `node_id`'s log dirs: `data/storage-N`, then `data/storage-N-dir2`..."""
        first = self.data_dir / "data" / f"storage-{node_id}"
        extra = range(2, self.layout.log_dirs_per_node + 1)
        return [first, *(first.with_name(f"{first.name}-dir{i}") for i in extra)]

    def service_spec(self, role: str, node_id: int) -> ProcessSpec:
        """The command line of one service process, as agreed with the service owners."""
        name = f"{role}-{node_id}"
        ready = self.data_dir / "run" / f"{name}.ready"
        ready.parent.mkdir(parents=True, exist_ok=True)
        args = [self.python, "-m", self.service_modules[role]]
        host = self.placement.host(name)
        if role == "metadata":
            args += ["--instance-id", str(node_id), "--host", host, "--port", "0"]
            args += ["--etcd", self.etcd_url]
        else:
            args += ["--node-id", str(node_id), "--host", host, "--port", "0"]
            if role == "storage":
                log_dirs = self.log_dirs(node_id)
                for log_dir in log_dirs:
                    log_dir.mkdir(parents=True, exist_ok=True)
                args += ["--zero-copy-port", "0", "--log-dirs", ",".join(map(str, log_dirs))]
                if self.direct_access_key is not None:
                    args += ["--direct-port", "0"]
            if not self.metadata_addresses:
                raise ClusterError(f"cannot start {name}: no metadata instance is ready")
            args += ["--metadata", ",".join(self.metadata_addresses)]
        args += ["--ready-file", str(ready)]
        if self.layout.tls:
            args += self._tls_args(role, name, host)
        if role == "storage" and self.layout.racks:
            args += ["--rack", self.layout.racks[(node_id - 1) % len(self.layout.racks)]]
        key_file = self.direct_access_key if role in ("storage", "gateway") else None
        if key_file is not None:
            args += ["--config", f"{DIRECT_ACCESS_KEY_SETTING}={key_file}"]
        if self.metrics:  # /metrics on a free port, reported in the ready file (decision 0033)
            args += ["--config", f"{METRICS_PORT}=0"]
        for key, value in self.layout.extra_config.get(role, {}).items():
            args += ["--config", f"{key}={value}"]
        return ProcessSpec(
            name=name,
            role=role,
            node_id=node_id,
            args=tuple(args),
            log_path=self._log(name),
            ready_file=ready,
            env={**self.env, **self.placement.env(name)},
            wrapper=self.placement.wrapper(name),
        )

    @property
    def direct_access_key(self) -> Path | None:
        """The cluster's direct-access key file (made, mode 0600, on first use); None when
        the cluster has no direct access (`direct_access` off, or `tls`)."""
        if not self.layout.direct_access or self.layout.tls:
            return None
        path = self.data_dir / DIRECT_ACCESS_KEY_FILE
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            # A fresh file of our own: never through a link planted at the name, never
            # into a file someone else opened (a stale tmp of a crashed start is removed).
            tmp.unlink(missing_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fd = os.open(tmp, flags, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(new_key() + "\n")
            os.replace(tmp, path)
        return path

    @property
    def certificates(self) -> ClusterCertificates:
        """The cluster's CA and per-process certificates (made on first use)."""
        return ClusterCertificates(self.data_dir)

    def _tls_args(self, role: str, name: str, host: str) -> list[str]:
        """`--config` items for mutual TLS with `name`'s own certificate; a gateway also serves
        its client listener with it (clients verify it against the CA, no client certificate
        asked: the gateway authenticates callers by their credentials), and a metadata instance
        presents it to the cluster's etcd, which requires a client certificate (decision 0035,
        addendum). `/metrics` follows the internal listener: HTTPS with the same certificate."""
        paths = self.certificates.for_process(name, [host, LOCALHOST, "localhost"])
        internal = InternalTls("SSL", str(paths.certificate), str(paths.key), str(paths.ca))
        settings = internal.to_overrides()
        if role == "metadata" and self.layout.etcd_url is None:  # our etcd requires client certs
            settings[ETCD_SSL_CA] = str(paths.ca)
            settings[ETCD_SSL_CERTIFICATE] = str(paths.certificate)
            settings[ETCD_SSL_KEY] = str(paths.key)
        if role == "gateway":
            settings["ssl.certificate.location"] = str(paths.certificate)
            settings["ssl.key.location"] = str(paths.key)
            settings["ssl.ca.location"] = str(paths.ca)
        return [item for k, v in settings.items() for item in ("--config", f"{k}={v}")]

    @property
    def client_tls_config(self) -> dict[str, str]:
        """SDK settings for reaching the gateways of a TLS cluster (empty otherwise)."""
        if not self.layout.tls:
            return {}
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.certificates.ca_path)}

    def wait_ready(
        self, timeout: float = 60.0, storage_nodes: Collection[int] | None = None
    ) -> ClusterView | None:
        """Wait until every live gateway reports a controller and `storage_nodes` (default:
        every live storage node) live; returns the last gateway's view (None: no gateway)."""
        gateways = [p.address for p in self.by_role("gateway") if p.alive and p.address]
        if not gateways:
            return None
        if storage_nodes is None:
            storage_nodes = [p.node_id or 0 for p in self.by_role("storage") if p.alive]
        return wait_for_storage_nodes(gateways, storage_nodes, timeout, self.gateway_credentials)

    @property
    def gateway_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS channel credentials for the gateways when `tls` or their extra_config turns TLS
        on (under `tls`, the launcher's own certificate from the cluster CA)."""
        if self.layout.tls:
            paths = self.certificates.for_process(LAUNCHER_CERTIFICATE, [LOCALHOST])
            return tls_channel_credentials(str(paths.ca), str(paths.certificate), str(paths.key))
        return gateway_channel_credentials(self.layout.extra_config.get("gateway", {}))

    def describe_cluster(self, timeout: float = 5.0) -> admin_pb2.DescribeClusterResponse:
        """DescribeCluster through the first gateway."""
        return describe_cluster(self.gateway_address, timeout, credentials=self.gateway_credentials)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> common_pb2.TopicMetadata:
        """Create a topic through the first gateway and wait for a leader per partition."""
        return create_topic(
            self.gateway_address,
            name,
            partitions,
            replication_factor,
            configs,
            timeout,
            self.gateway_credentials,
        )

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every process, gateways first and etcd last (each tier in parallel), and
        SIGKILL whatever is still running `grace` seconds later. By PID only."""
        try:
            for role in STOP_ORDER:
                procs = [p for p in self.by_role(role) if p.alive]
                for proc in procs:
                    proc.begin_stop()
                tier_deadline = time.monotonic() + grace
                for proc in procs:
                    proc.finish_stop(max(0.0, tier_deadline - time.monotonic()))
        finally:
            if self.processes and self.data_dir.exists():
                self.save_state()

    def save_state(self) -> None:
        write_state(self.data_dir, self.layout, self._etcd_url, self.processes.values())
