"""Helpers of the tests of direct data access (decision 0047): a raw-socket client of a storage
node's direct port, grants asked of a real gateway, and the node's direct-port counters from its
`/metrics` (what a test reads to prove records took the direct path: `direct_counters`).

Every socket has a timeout; every wait is bounded.
"""

from __future__ import annotations

import socket
import struct
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.common.zerocopy import (
    FRAME_HEADER,
    KIND_FETCH,
    KIND_GRANT,
    KIND_PRODUCE,
    encode_frame,
    fill_records,
    records_total,
)
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

READ = gateway_pb2.DATA_ACCESS_READ
WRITE = gateway_pb2.DATA_ACCESS_WRITE
TIMEOUT_S = 15.0


def ask_grant(
    cluster: LocalCluster,
    operation: int,
    topics: list[str],
    node_id: int,
    metadata: tuple[tuple[str, str], ...] = (),
) -> gateway_pb2.GrantDataAccessResponse:
    """GrantDataAccess on the cluster's first gateway."""
    with sync_channel(cluster.gateway_address, cluster.gateway_credentials) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        request = gateway_pb2.GrantDataAccessRequest(
            operation=operation,  # type: ignore[arg-type]
            topics=topics,
            node_id=node_id,
        )
        response: gateway_pb2.GrantDataAccessResponse = stub.GrantDataAccess(
            request, timeout=TIMEOUT_S, metadata=metadata
        )
        return response


def storage_nodes(cluster: LocalCluster) -> dict[int, common_pb2.Node]:
    """The live storage nodes as GetMetadata shows them (with their direct_port)."""
    with sync_channel(cluster.gateway_address, cluster.gateway_credentials) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        response = stub.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[]), timeout=TIMEOUT_S)
    return {n.node_id: n for n in response.nodes if n.kind == common_pb2.NODE_KIND_STORAGE}


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> common_pb2.Node:
    """The storage node leading `topic`'s `partition`, as GetMetadata shows it."""
    with sync_channel(cluster.gateway_address, cluster.gateway_credentials) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        meta = stub.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]), timeout=TIMEOUT_S)
    leader = meta.topics[0].partitions[partition].leader
    return {n.node_id: n for n in meta.nodes if n.kind == common_pb2.NODE_KIND_STORAGE}[leader]


class DirectConnection:
    """One blocking connection to a direct port (not thread-safe)."""

    def __init__(self, host: str, port: int, rcvbuf: int | None = None) -> None:
        """`rcvbuf`: a small SO_RCVBUF, set before connecting (a client slow to read)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(TIMEOUT_S)
        try:
            self.sock.connect((host, port))
        except OSError:
            self.sock.close()
            raise
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __enter__(self) -> DirectConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def recv_exactly(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            if not chunk:
                raise ConnectionResetError("the node closed the connection")
            out += chunk
        return bytes(out)

    def read_payload(self) -> bytes:
        """The next answer's payload ([u32 length][payload])."""
        (length,) = FRAME_HEADER.unpack(self.recv_exactly(FRAME_HEADER.size))
        return self.recv_exactly(length)

    def send_grant(self, grant: bytes) -> data_pb2.DataGrantResponse:
        self.sock.sendall(encode_frame(grant, KIND_GRANT))
        answer = data_pb2.DataGrantResponse()
        answer.ParseFromString(self.read_payload())
        return answer

    def fetch(self, request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
        self.send_fetch(request)
        return self.read_fetch()

    def send_fetch(self, request: data_pb2.FetchRequest) -> None:
        self.sock.sendall(encode_frame(request.SerializeToString(), KIND_FETCH))

    def read_fetch(self) -> data_pb2.FetchResponse:
        """The next answer, a fetch's, with its records."""
        response = data_pb2.FetchResponse()
        response.ParseFromString(self.read_payload())
        fill_records(response, self.recv_exactly(records_total(response)))
        return response

    def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), as a client that crashed or gave up."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def produce(self, request: data_pb2.ProduceRequest) -> data_pb2.ProduceResponse:
        self.sock.sendall(encode_frame(request.SerializeToString(), KIND_PRODUCE))
        response = data_pb2.ProduceResponse()
        response.ParseFromString(self.read_payload())
        return response

    def closed_by_peer(self) -> bool:
        """Whether the node closed the connection (reads its end within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def fetch_request(topic: str, partitions: int = 1, offset: int = 0) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        max_wait_ms=0,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(topic=topic, partition=p, fetch_offset=offset)
            for p in range(partitions)
        ],
        correlation_id=7,
    )


def produce_request(topic: str, records: bytes, partition: int = 0) -> data_pb2.ProduceRequest:
    return data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_LEADER,
        timeout_ms=10_000,
        partitions=[data_pb2.ProducePartition(topic=topic, partition=partition, records=records)],
        correlation_id=11,
    )


@dataclass(frozen=True, slots=True)
class DirectCounters:
    """A storage node's direct-port counters (riverlog_direct_*_total)."""

    connections: float
    grants_accepted: float
    grants_refused: float
    bytes_read: float
    bytes_written: float
    budget_refusals: float
    closed_limit: float
    closed_no_grant: float


def direct_counters(cluster: LocalCluster, node_id: int) -> DirectCounters:
    """Storage node `node_id`'s direct-port counters, scraped from its /metrics. They only
    grow: a test proves its records took the direct path by reading them before and after
    (another test's traffic may add to them, never take away)."""
    url = cluster.storage(node_id).metrics_url
    assert url is not None, "the cluster serves no /metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    node = ("node_id", str(node_id))

    def get(name: str, *labels: tuple[str, str]) -> float:
        return samples.get((name, tuple(sorted((node, *labels)))), 0.0)

    return DirectCounters(
        connections=get("riverlog_direct_connections_total"),
        grants_accepted=get("riverlog_direct_grants_total", ("result", "accepted")),
        grants_refused=get("riverlog_direct_grants_total", ("result", "refused")),
        bytes_read=get("riverlog_direct_bytes_total", ("operation", "read")),
        bytes_written=get("riverlog_direct_bytes_total", ("operation", "write")),
        budget_refusals=get("riverlog_direct_budget_refusals_total"),
        closed_limit=get("riverlog_direct_connections_closed_total", ("reason", "limit")),
        closed_no_grant=get("riverlog_direct_connections_closed_total", ("reason", "no_grant")),
    )
