"""The direct port's limits (decision 0047, rpc/connection_limits.py) through real processes on
the session cluster, with raw sockets: connections from one address past
`max.connections.per.ip` (default 100) are closed at accept and the cap frees up as
connections end; a client that sends no grant, or only a grant frame's header, is closed after
`direct.grant.timeout.ms` (5 s on the session cluster); a grant frame over MAX_GRANT_BYTES, and
a granted connection's produce frame over `direct.max.request.bytes` (default 8 MiB), are
refused on their headers, before the node reads (or allocates) their bodies. And GetMetadata
tells clients each node's direct port but not its internal zero-copy port."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest
from direct_client import (
    TIMEOUT_S,
    WRITE,
    DirectConnection,
    ask_grant,
    direct_counters,
    leader_of,
    storage_nodes,
)

from riverlog.cluster import LocalCluster
from riverlog.common.grants import MAX_GRANT_BYTES
from riverlog.common.zerocopy import FRAME_HEADER, KIND_GRANT, KIND_PRODUCE
from riverlog.v1 import common_pb2

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NewTopic = Callable[..., str]
PER_IP = 100  # max.connections.per.ip's default (the session cluster keeps it)
DIRECT_MAX_REQUEST = 8 * 1024 * 1024  # direct.max.request.bytes' default


def _header(kind: int, length: int) -> bytes:
    return FRAME_HEADER.pack(kind << 24 | length)


@contextmanager
def _sockets(node: common_pb2.Node, count: int) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        socks = []
        for _ in range(count):
            sock = socket.create_connection((node.host, node.direct_port), timeout=TIMEOUT_S)
            socks.append(stack.enter_context(sock))
        yield socks


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_connections_past_the_per_ip_cap_are_closed_at_accept(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    answer = ask_grant(cluster, WRITE, [topic], node.node_id)
    assert answer.error_code == 0, answer
    before = direct_counters(cluster, node.node_id)
    with _sockets(node, PER_IP + 3) as socks:
        # Connections are accepted in the order they were made: the last ones are over the
        # cap (and earlier ones too, if another client of this address still had one open).
        assert all(_closed(s) for s in socks[-3:])
        assert direct_counters(cluster, node.node_id).closed_limit >= before.closed_limit + 3
    # The ended connections free the cap: a new one is served (bounded: the node sees the
    # closes as its loop reads them, a new connection may come first).
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        with DirectConnection(node.host, node.direct_port) as conn:
            try:
                assert conn.send_grant(answer.grant).error_code == 0
                break
            except ConnectionResetError:
                assert time.monotonic() < deadline, "the per-address cap was never released"


def test_a_client_without_a_grant_is_closed_after_the_deadline(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    node = leader_of(cluster, new_topic())
    before = direct_counters(cluster, node.node_id)
    with _sockets(node, 2) as (silent, header_only):
        # the reviewer's probe: a grant frame's header announcing its largest size, and no body
        header_only.sendall(_header(KIND_GRANT, MAX_GRANT_BYTES))
        assert _closed(silent) and _closed(header_only)
    assert direct_counters(cluster, node.node_id).closed_no_grant >= before.closed_no_grant + 2


def test_oversized_grant_and_produce_headers_are_refused_unread(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    with DirectConnection(node.host, node.direct_port) as conn:
        conn.sock.sendall(_header(KIND_GRANT, MAX_GRANT_BYTES + 1))
        assert conn.closed_by_peer()
    answer = ask_grant(cluster, WRITE, [topic], node.node_id)
    with DirectConnection(node.host, node.direct_port) as conn:
        assert conn.send_grant(answer.grant).error_code == 0
        # Only the header: a node that waited for (and allocated) the announced body would
        # keep the connection open.
        conn.sock.sendall(_header(KIND_PRODUCE, DIRECT_MAX_REQUEST + 1))
        assert conn.closed_by_peer()


def test_clients_are_told_the_direct_port_not_the_internal_zero_copy_port(
    cluster: LocalCluster,
) -> None:
    nodes = storage_nodes(cluster)
    assert nodes and all(n.direct_port > 0 and n.zero_copy_port == 0 for n in nodes.values())
    assert all(cluster.storage(i).info["zero_copy_port"] for i in nodes)  # yet they serve one
