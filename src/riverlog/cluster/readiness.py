"""How the launcher knows a cluster is usable: etcd answers its /health endpoint (over HTTPS with
a client certificate for a TLS cluster's etcd), and a gateway
reports a controller and every storage node live (DescribeCluster, with GetMetadata as the
fallback for a gateway that does not serve it). A ready file only says one process is serving;
only the gateway's view says the processes found each other.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import grpc

from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel, tls_channel_credentials
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import admin_pb2, common_pb2, gateway_pb2, gateway_pb2_grpc

from .errors import ClusterError

HOST = "127.0.0.1"
LAUNCHER_CLIENT_ID = "riverlog-launcher"


def free_port(host: str = HOST, preferred: int | None = None) -> int:
    """A TCP port on `host` that was free a moment ago (`preferred` when it still is)."""
    candidates = [preferred, 0] if preferred else [0]
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As servers bind (Go and gRPC set it): connections in TIME_WAIT do not block.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port or 0))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise ClusterError(f"no free port on {host}")  # pragma: no cover - bind to 0 never fails


def etcd_tls_args(files: CertificateFiles) -> tuple[str, ...]:
    """etcd serving clients over TLS with `files`: its certificate and key (--cert-file,
    --key-file) and the CA clients are verified against (--trusted-ca-file, which with
    --client-cert-auth every client needs a certificate of)."""
    return (
        f"--cert-file={files.certificate}",
        f"--key-file={files.key}",
        f"--trusted-ca-file={files.ca}",
        "--client-cert-auth",
    )


def etcd_tls_files(args: Sequence[str]) -> CertificateFiles | None:
    """The files in an etcd command line; None when it serves clients in plaintext."""
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    if not flags.get("cert-file"):
        return None
    return CertificateFiles(
        flags["cert-file"], flags.get("key-file", ""), flags.get("trusted-ca-file", "")
    )


def etcd_client_context(files: CertificateFiles) -> ssl.SSLContext:
    """How the launcher asks etcd's `/health` over HTTPS: verifying etcd against the CA and
    presenting etcd's own certificate (made for both ends, signed by that CA) as the client
    certificate that --client-cert-auth asks for."""
    context = ssl.create_default_context(cafile=files.ca)
    context.load_cert_chain(files.certificate, files.key)
    return context


def etcd_healthy(
    health_url: str, timeout: float = 1.0, tls: CertificateFiles | None = None
) -> bool:
    """True when etcd's `/health` endpoint says {"health": "true"} (over HTTPS with `tls`)."""
    try:
        context = etcd_client_context(tls) if tls is not None else None
        with urllib.request.urlopen(health_url, timeout=timeout, context=context) as response:
            body = json.loads(response.read().decode())
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return isinstance(body, dict) and str(body.get("health")) == "true"


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one gateway knows about the cluster."""

    cluster_id: str
    controller_id: int
    controller_epoch: int
    storage_nodes: frozenset[int]
    gateways: frozenset[int]
    response: admin_pb2.DescribeClusterResponse

    def missing(self, storage_nodes: Collection[int]) -> list[int]:
        return sorted(set(storage_nodes) - self.storage_nodes)


def gateway_channel_credentials(
    gateway_config: Mapping[str, str],
) -> grpc.ChannelCredentials | None:
    """How the launcher reaches gateways started with `gateway_config` (their --config): TLS
    trusting ssl.ca.location when ssl.certificate.location is set, presenting the gateway's own
    certificate as its client certificate (for ssl.client.auth=required; DescribeCluster is open
    to any principal); None for plaintext gateways."""
    if not gateway_config.get("ssl.certificate.location"):
        return None
    return tls_channel_credentials(
        gateway_config.get("ssl.ca.location", ""),
        gateway_config["ssl.certificate.location"],
        gateway_config.get("ssl.key.location", ""),
    )


def describe_cluster(
    address: str,
    timeout: float = 5.0,
    client_id: str = LAUNCHER_CLIENT_ID,
    credentials: grpc.ChannelCredentials | None = None,
) -> admin_pb2.DescribeClusterResponse:
    """One DescribeCluster call through the gateway at `address` (TLS with `credentials`);
    raises RiverlogError."""
    with sync_channel(address, credentials) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        metadata = ((CLIENT_ID_KEY, client_id),)
        try:
            response: admin_pb2.DescribeClusterResponse = stub.DescribeCluster(
                admin_pb2.DescribeClusterRequest(), timeout=timeout, metadata=metadata
            )
            return response
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise from_rpc_error(e) from None
        try:
            meta: gateway_pb2.GetMetadataResponse = stub.GetMetadata(
                gateway_pb2.GetMetadataRequest(), timeout=timeout, metadata=metadata
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
    return admin_pb2.DescribeClusterResponse(
        cluster_id=meta.cluster_id,
        controller_id=meta.controller_id,
        controller_epoch=-1,
        nodes=list(meta.nodes),
        metadata_version=meta.metadata_version,
    )


def cluster_view(
    address: str, timeout: float = 5.0, credentials: grpc.ChannelCredentials | None = None
) -> ClusterView:
    response = describe_cluster(address, timeout, credentials=credentials)
    return ClusterView(
        cluster_id=response.cluster_id,
        controller_id=response.controller_id,
        controller_epoch=response.controller_epoch,
        storage_nodes=frozenset(
            n.node_id for n in response.nodes if n.kind == common_pb2.NODE_KIND_STORAGE
        ),
        gateways=frozenset(
            n.node_id for n in response.nodes if n.kind == common_pb2.NODE_KIND_GATEWAY
        ),
        response=response,
    )


def wait_for_storage_nodes(
    gateway_addresses: Sequence[str],
    storage_nodes: Collection[int],
    timeout: float,
    credentials: grpc.ChannelCredentials | None = None,
) -> ClusterView:
    """Block until every gateway reports a controller and all `storage_nodes` live.

    Raises ClusterError naming what was still missing when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    view: ClusterView | None = None
    pending = list(gateway_addresses)
    while pending:
        address = pending[0]
        try:
            view = cluster_view(
                address, min(5.0, max(0.5, deadline - time.monotonic())), credentials
            )
        except Exception as e:  # any failure is "not yet": the gateway may still be starting
            last = f"gateway {address}: {e}"
        else:
            missing = view.missing(storage_nodes)
            if view.controller_id >= 0 and not missing:
                pending.pop(0)
                continue
            last = (
                f"gateway {address} sees controller {view.controller_id}, "
                f"storage nodes {sorted(view.storage_nodes)}; missing {missing}"
            )
        if time.monotonic() >= deadline:
            raise ClusterError(f"cluster not ready after {timeout:.0f}s: {last}")
        time.sleep(0.1)
    if view is None:  # no gateways: nothing to ask
        raise ClusterError("no gateway to ask whether the cluster is ready")
    return view
