"""Quota windows survive a change of the quota instances (issue 13 item 3): a client held back
by its byte-rate quota stays held back when `riverlog cluster remove quota N` stops the
instance owning it, when `riverlog cluster add quota` makes a new instance its owner, and
across a clean restart of that owner.
Each instance is asked directly, as a gateway asks it (an empty ReportUsage answers with every
hold in force there): the entity's new owner never received its usage from a gateway, so a hold
there is the window the previous owner handed over."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from riverlog.client import AdminClient, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import MetricEntity, QuotaEntity
from riverlog.common.quota.handover import owner_of
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import quota_pb2, quota_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

BOUND = 10_000.0  # bytes/s
_seq = itertools.count(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("quota-move") / "c",
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        quota_nodes=2,
    )
    try:
        local.start(timeout=120)
        yield local
    finally:  # the state file knows what the CLI started; stop by the PIDs recorded there
        LocalCluster.attach(local.data_dir).stop()
        local.stop()


def cli(cluster: LocalCluster, *argv: str) -> None:
    command = [sys.executable, "-m", "riverlog.cli.main", "cluster", *argv]
    command += ["--data-dir", str(cluster.data_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr


def hold_ms(cluster: LocalCluster, node_id: int, client_id: str) -> int:
    """The hold quota instance `node_id` has in force on `client_id`'s produce quota (0: none),
    asked with an empty report as a gateway's heartbeat."""
    address = LocalCluster.attach(cluster.data_dir).quota(node_id).address
    assert address is not None
    stub = quota_pb2_grpc.QuotaServiceStub(sync_channel(address))  # type: ignore[no-untyped-call]
    answer = stub.ReportUsage(
        quota_pb2.ReportUsageRequest(gateway_id="probe", seq=next(_seq), interval_ms=100),
        timeout=10,
    )
    return max(
        (
            h.remaining_ms
            for h in answer.holds
            if h.quota_type == "producer_byte_rate" and h.entity.client_id == client_id
        ),
        default=0,
    )


def wait_for_hold(cluster: LocalCluster, node_id: int, client_id: str) -> int:
    deadline = time.monotonic() + 30
    while (held := hold_ms(cluster, node_id, client_id)) <= 0:
        assert time.monotonic() < deadline, f"quota {node_id} never held {client_id}"
        time.sleep(0.2)
    return held


def moving_client_id() -> str:
    """A client id owned by instance 2 of {1, 2}, and by the added instance whether it gets id
    2 again or 3: it moves at both steps."""
    for i in itertools.count():
        entity = MetricEntity(None, f"mover-{i}")
        if owner_of(entity, [1, 2]) == 2 and owner_of(entity, [1, 3]) == 3:
            return f"mover-{i}"
    raise AssertionError("unreachable")


def test_a_throttled_client_stays_throttled_across_quota_remove_and_add(
    cluster: LocalCluster,
) -> None:
    client_id = moving_client_id()
    cluster.create_topic("held", 1, 1)
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        admin.alter_client_quotas([(QuotaEntity(None, client_id), {"producer_byte_rate": BOUND})])
    conf = {
        "bootstrap.servers": cluster.gateway_address,
        "client.id": client_id,
        "linger.ms": 100,
        "batch.size": 2_000_000,
    }
    with Producer(conf) as producer:
        # one request of 800 kB: accepted, then 80 kB/s over the 10 s window against 10 kB/s
        # holds the client about 70 s
        producer.send_many("held", [b"x" * 20_000 for _ in range(40)], partition=0)
        producer.flush(60)
        assert producer.metrics()["produce-throttle-time-max"] > 0
    assert wait_for_hold(cluster, 2, client_id) > 0
    assert hold_ms(cluster, 1, client_id) == 0  # instance 1 never saw this client's usage

    cli(cluster, "remove", "quota", "2")
    # the hold runs on at the new owner (re-judged on the merged window there, so it may end
    # a little later, never sooner than the usage says)
    assert wait_for_hold(cluster, 1, client_id) > 0

    cli(cluster, "add", "quota")
    quota_ids = [p.node_id for p in LocalCluster.attach(cluster.data_dir).by_role("quota")]
    assert len(quota_ids) == 2 and quota_ids[0] == 1 and quota_ids[1] in (2, 3)
    added = quota_ids[1] or 0
    assert wait_for_hold(cluster, added, client_id) > 0

    # a clean restart: out to instance 1 while it is away, back once it registered again
    cli(cluster, "restart", "quota", str(added))
    assert wait_for_hold(cluster, added, client_id) > 0
