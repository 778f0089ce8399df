"""What the transaction tests share: their cluster (etcd, one metadata instance, three storage
nodes, two coordinators, a gateway; few internal partitions, fast heartbeats and follower
fetches, a 200 ms timed-out-transaction sweep, no initial rebalance delay: each group here has
one member at a time), a raw gateway stub, and a bounded poll."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import gateway_pb2_grpc

T = TypeVar("T")

TXN_CLUSTER_CONFIG: Mapping[str, Mapping[str, str]] = {
    "metadata": {
        "broker.heartbeat.interval.ms": "300",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.num.partitions": "6",
    },
    "storage": {"replica.fetch.wait.max.ms": "100"},
    "coordinator": {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "group.initial.rebalance.delay.ms": "0",
    },
}


TXN_CLUSTER_SHAPE: Mapping[str, int] = {
    "storage_nodes": 3,
    "metadata_nodes": 1,
    "gateways": 1,
    "coordinators": 2,
}


@contextmanager
def txn_cluster(data_dir: Path) -> Iterator[LocalCluster]:
    """A transaction cluster of the caller's own (for tests that kill its processes; the
    others share conftest.py's `shared_txn_cluster`)."""
    with LocalCluster(data_dir, **TXN_CLUSTER_SHAPE, extra_config=TXN_CLUSTER_CONFIG) as local:
        yield local


@contextmanager
def gateway_stub(cluster: LocalCluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    channel = sync_channel(cluster.gateway_address)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()


def wait_for(predicate: Callable[[], T | None], timeout_s: float = 60.0, what: str = "") -> T:
    """Poll `predicate` until it answers something true (returned), up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last  # type: ignore[return-value]
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
