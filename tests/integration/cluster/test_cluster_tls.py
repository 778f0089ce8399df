"""A local cluster with every channel encrypted (`LocalCluster(tls=True)`, what `riverlog
cluster up --tls` starts; decision 0035): two metadata instances, three storage nodes, a group
coordinator, a quota instance and a gateway, each with its own certificate from a throwaway CA.
It is the `tls_cluster` the behavioural suites that take `client_cluster` also run on (client
round trips, acks=all on RF 3, idempotence, a replication round trip: conftest.py), so what is
asserted here holds whatever those tests did on it.

Produce (acks=all, RF 3) and a group consume go through the TLS gateway, and the followers catch
up over TLS replication. That every channel is encrypted is checked from the servers' side:
each internal server answers `riverlog.debug.PeerCertificates/Describe` with the common names of
the verified client certificates it saw per method, and the test asserts that each expected
edge (gateway → storage, coordinator, quota, metadata; storage → storage replication; every
service → metadata; metadata → metadata forwarding) shows up there under TLS with the caller's
certificate, and that no call came without one. A plaintext client, a client without a
certificate, or one with a certificate from another CA is refused by every internal server, and
a storage node asked for a zero-copy port under TLS refuses to start.

The cluster's etcd serves clients over TLS and requires a client certificate of the cluster CA
(decision 0035, addendum): the metadata instances wrote the cluster through it, the test reads
it back with a certificate, and a plaintext client, one without a certificate and one with
another CA's are refused. Every process's `/metrics` answers over HTTPS with its certificate and
refuses plain HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import etcd3
import etcd3.exceptions
import grpc
import pytest

from riverlog.client import AdminClient, Consumer, Producer
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.cluster.certs import issue, new_ca
from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.channel import sync_channel, tls_channel_credentials
from riverlog.common.rpc.peer_certificates import DESCRIBE_METHOD
from riverlog.v1 import admin_pb2, metadata_pb2_grpc, storage_pb2, storage_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

T = TypeVar("T")
# What a plain-HTTP request to an HTTPS endpoint gets: the connection closed, or bytes that are
# not HTTP.
REFUSED = (OSError, http.client.HTTPException)
RECORDS = 200
STORAGE = "/riverlog.v1.StorageService/"
METADATA = "/riverlog.v1.MetadataService/"


def wait_until(predicate: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except grpc.RpcError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


@pytest.fixture(scope="module")
def cluster(tls_cluster: LocalCluster) -> LocalCluster:
    """The shared TLS cluster (tests/integration/conftest.py)."""
    return tls_cluster


@pytest.fixture(scope="module")
def credentials(cluster: LocalCluster) -> grpc.ChannelCredentials:
    """The test's own client certificate from the cluster CA (CN=tls-test)."""
    paths = cluster.certificates.for_process("tls-test", ["127.0.0.1"])
    return tls_channel_credentials(str(paths.ca), str(paths.certificate), str(paths.key))


def peers(address: str, credentials: grpc.ChannelCredentials) -> dict[str, Any]:
    """What the internal server at `address` saw: {"transport", "methods": {m: {CN: n}}}."""
    with sync_channel(address, credentials) as channel:
        raw = channel.unary_unary(DESCRIBE_METHOD)(b"", timeout=10)
    document: dict[str, Any] = json.loads(raw)
    return document


def callers(seen: dict[str, Any], method: str) -> set[str]:
    return set(seen["methods"].get(method, {}))


def log_end_offsets(
    cluster: LocalCluster, credentials: grpc.ChannelCredentials, topic: str
) -> dict[int, tuple[int, int]]:
    """node id -> (log end offset, high watermark) of the topic's partition 0 replicas."""
    out: dict[int, tuple[int, int]] = {}
    for process in cluster.by_role("storage"):
        assert process.address is not None and process.node_id is not None
        with sync_channel(process.address, credentials) as channel:
            stub = storage_pb2_grpc.StorageServiceStub(channel)  # type: ignore[no-untyped-call]
            reply = stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=10)
        for log_dir in reply.log_dirs:
            for p in log_dir.partitions:
                if p.topic == topic and p.partition == 0:
                    out[process.node_id] = (p.log_end_offset, p.high_watermark)
    return out


@pytest.fixture(scope="module")
def traffic(cluster: LocalCluster, credentials: grpc.ChannelCredentials) -> str:
    """Produce RECORDS records with acks=all to a new RF 3 topic through the gateway, read them
    back in a consumer group, and wait until every replica has them all; returns the topic."""
    topic = unique_topic_name("tls")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    client = {"bootstrap.servers": cluster.bootstrap_servers, **cluster.client_tls_config}
    with Producer({**client, "acks": "all", "delivery.timeout.ms": 60_000}) as producer:
        futures = [producer.send(topic, b"v%d" % i) for i in range(RECORDS)]
        producer.flush()
        assert [f.result(30).offset for f in futures] == list(range(RECORDS))
    group = {"group.id": f"{topic}-group", "auto.offset.reset": "earliest"}
    values: list[bytes | None] = []
    with Consumer({**client, **group, "fetch.max.wait.ms": 100}) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        consumer.commit_sync()
    assert values == [b"v%d" % i for i in range(RECORDS)]
    wait_until(
        lambda: set(log_end_offsets(cluster, credentials, topic).values()) == {(RECORDS, RECORDS)},
        "every replica to reach the log end",
    )
    return topic


def test_produce_consume_and_replication_over_tls(
    cluster: LocalCluster, credentials: grpc.ChannelCredentials, traffic: str
) -> None:
    offsets = log_end_offsets(cluster, credentials, traffic)
    assert offsets == dict.fromkeys((1, 2, 3), (RECORDS, RECORDS))
    logs = [
        b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
        for d in (cluster.log_dirs(n)[0] / f"{traffic}-0" for n in (1, 2, 3))
    ]
    assert logs[0] and logs[0] == logs[1] == logs[2]  # the followers copied the leader's bytes
    # No storage node opened the plaintext zero-copy channel: fetches went over TLS gRPC.
    assert [p.info.get("zero_copy_port") for p in cluster.by_role("storage")] == [0, 0, 0]


def test_every_internal_channel_carries_the_callers_certificate(
    cluster: LocalCluster, credentials: grpc.ChannelCredentials, traffic: str
) -> None:
    names = {p.name for p in cluster.processes.values() if p.role != "etcd"}
    storage_names = {f"storage-{n}" for n in (1, 2, 3)}
    # metadata → metadata: a write sent to the instance that is not the controller is forwarded
    # to the controller over the instances' own channel. The write itself may outlast the
    # forward's deadline (a controller write sometimes stalls for the 10 s forward timeout, in
    # plaintext too; see the report of decision 0035): only the forwarded call matters here.
    view = cluster.describe_cluster()
    controller = f"metadata-{view.controller_id}"
    other = next(p for p in cluster.by_role("metadata") if p.name != controller)
    assert other.address is not None
    with sync_channel(other.address, credentials) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)  # type: ignore[no-untyped-call]
        name = unique_topic_name("tls-forwarded")
        topic = admin_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        try:
            [created] = stub.CreateTopics(
                admin_pb2.CreateTopicsRequest(topics=[topic]), timeout=30
            ).topics
            assert created.error_code == ErrorCode.NONE, created.error_message
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED, exc  # type: ignore[attr-defined]
    controller_address = cluster.processes[controller].address or ""
    wait_until(
        lambda: (
            other.name in callers(peers(controller_address, credentials), METADATA + "CreateTopics")
        ),
        f"{controller} to record a CreateTopics forwarded by {other.name}",
    )
    # Every service heartbeats to the metadata service every few seconds: on a cluster whose
    # tests ran quickly the first heartbeat of one may still be to come.
    heartbeating = storage_names | {"gateway-1", "coordinator-1", "quota-1"}

    def heartbeats() -> set[str]:
        seen_by = [peers(m.address or "", credentials) for m in cluster.by_role("metadata")]
        return set().union(*(callers(s, METADATA + "Heartbeat") for s in seen_by))

    wait_until(lambda: heartbeats() >= heartbeating, "every service's first heartbeat")

    seen = {
        p.name: peers(p.address or "", credentials)
        for p in cluster.processes.values()
        if p.role not in ("etcd", "gateway")
    }
    for name, view_of in seen.items():
        assert view_of["transport"] == "ssl", name
        for method, by_name in view_of["methods"].items():
            # Every call came with a certificate of the cluster CA: a process's or the test's.
            assert set(by_name) <= names | {"tls-test", "launcher"}, (name, method)

    # Every service registers with and heartbeats to the metadata service, over TLS.
    metadata_callers: set[str] = set()
    for instance in cluster.by_role("metadata"):
        metadata_callers |= callers(seen[instance.name], METADATA + "Heartbeat")
    assert metadata_callers >= heartbeating
    assert other.name in callers(seen[controller], METADATA + "CreateTopics")

    client = {"bootstrap.servers": cluster.bootstrap_servers, **cluster.client_tls_config}
    with AdminClient(client) as admin:
        leader = admin.describe_topics([traffic])[traffic].partitions[0].leader
    assert "gateway-1" in callers(seen[f"storage-{leader}"], STORAGE + "Produce")
    followers = storage_names - {f"storage-{leader}"}
    # storage → storage replication: both followers fetch from the leader with their own cert.
    assert callers(seen[f"storage-{leader}"], STORAGE + "Fetch") >= followers | {"gateway-1"}
    # gateway → coordinator (the consumer group) and gateway → quota (usage reports).
    coordinator_methods = {
        m: set(by_name)
        for m, by_name in seen["coordinator-1"]["methods"].items()
        if m != DESCRIBE_METHOD
    }
    assert coordinator_methods
    assert all(by_name == {"gateway-1"} for by_name in coordinator_methods.values())
    assert "gateway-1" in callers(seen["quota-1"], "/riverlog.v1.QuotaService/ReportUsage")
    # coordinator → storage: the group's offsets are written to the offsets topic's leader.
    assert any(
        "coordinator-1" in callers(seen[s], STORAGE + "Produce") for s in sorted(storage_names)
    )


def test_internal_servers_refuse_plaintext_and_foreign_certificates(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ca_pem = cluster.certificates.ca_path.read_bytes()
    rogue = issue(new_ca(), "intruder", ["127.0.0.1"])
    clients: dict[str, Callable[[str], grpc.Channel]] = {
        "plaintext": lambda a: sync_channel(a),
        "no client certificate": lambda a: sync_channel(
            a, grpc.ssl_channel_credentials(root_certificates=ca_pem)
        ),
        "another CA's certificate": lambda a: sync_channel(
            a,
            grpc.ssl_channel_credentials(
                root_certificates=ca_pem, private_key=rogue.key, certificate_chain=rogue.certificate
            ),
        ),
    }
    for process in cluster.processes.values():
        if process.role in ("etcd", "gateway"):
            continue
        assert process.address is not None
        for what, open_channel in clients.items():
            with open_channel(process.address) as channel:
                with pytest.raises(grpc.RpcError) as info:
                    channel.unary_unary(DESCRIBE_METHOD)(b"", timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE, (process.name, what)  # type: ignore[attr-defined]


def test_a_zero_copy_port_under_tls_is_refused_at_start(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    paths = cluster.certificates.for_process("storage-9", ["127.0.0.1"])
    tls_args = [
        "--config=security.inter.broker.protocol=SSL",
        f"--config=listener.name.internal.ssl.certificate.location={paths.certificate}",
        f"--config=listener.name.internal.ssl.key.location={paths.key}",
        f"--config=listener.name.internal.ssl.ca.location={paths.ca}",
    ]
    args = [sys.executable, "-m", "riverlog.services.storage", "--node-id", "9"]
    args += ["--zero-copy-port", "45678", "--log-dirs", str(tmp_path), *tls_args]
    args += ["--metadata", ",".join(cluster.metadata_addresses)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert result.returncode == 2
    assert "cannot run under security.inter.broker.protocol=SSL" in result.stderr


def test_etcd_serves_only_clients_with_a_certificate_of_the_cluster_ca(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    url = urlsplit(cluster.etcd_url)
    assert url.scheme == "https" and url.hostname is not None and url.port is not None
    paths = cluster.certificates.for_process("tls-test", ["127.0.0.1"])
    ca = str(paths.ca)
    trusted = etcd3.client(
        url.hostname,
        url.port,
        ca_cert=ca,
        cert_key=str(paths.key),
        cert_cert=str(paths.certificate),
        timeout=10,
    )
    try:
        # Written by the metadata instances, which reach etcd with their own certificates.
        cluster_id, _ = trusted.get("/riverlog/cluster_id")
    finally:
        trusted.close()
    assert cluster_id is not None and cluster_id.decode() == cluster.describe_cluster().cluster_id
    rogue = issue(new_ca(), "intruder", ["127.0.0.1"])
    (tmp_path / "rogue.pem").write_bytes(rogue.certificate)
    (tmp_path / "rogue.key").write_bytes(rogue.key)
    refused: dict[str, dict[str, str]] = {
        "plaintext": {},
        "no client certificate": {"ca_cert": ca},
        "another CA's certificate": {
            "ca_cert": ca,
            "cert_key": str(tmp_path / "rogue.key"),
            "cert_cert": str(tmp_path / "rogue.pem"),
        },
    }
    outcomes: dict[str, str] = {}
    for what, tls in refused.items():
        client = etcd3.client(url.hostname, url.port, timeout=5, **tls)
        try:
            client.get("/riverlog/cluster_id")
            outcomes[what] = "answered"
        except etcd3.exceptions.Etcd3Exception:
            outcomes[what] = "refused"
        finally:
            client.close()
    assert outcomes == dict.fromkeys(refused, "refused")


def test_metrics_are_served_over_https_and_refuse_plain_http(cluster: LocalCluster) -> None:
    context = ssl.create_default_context(cafile=str(cluster.certificates.ca_path))
    services = [p for p in cluster.processes.values() if p.role != "etcd"]
    assert {p.role for p in services} == {"metadata", "storage", "coordinator", "quota", "gateway"}
    for process in services:
        url = process.metrics_url
        assert url is not None and url.startswith("https://"), process.name
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            text = response.read().decode()
        assert "process_cpu_seconds_total" in text, process.name
        with pytest.raises(REFUSED):  # the TLS handshake fails: no answer in plain HTTP
            urllib.request.urlopen(url.replace("https://", "http://", 1), timeout=10)
