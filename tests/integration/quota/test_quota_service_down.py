"""The quota service unreachable: the gateway keeps enforcing with its local view and says so
once in its log (not per request), and takes the service back when it returns."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from riverlog.client import AdminClient, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import QuotaEntity

pytestmark = [pytest.mark.integration, pytest.mark.fault, pytest.mark.timeout(180)]


def _throttled(producer: Producer, topic: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(50):
            producer.send(topic, b"d" * 1000)
        producer.flush(30)
        if producer.metrics()["produce-throttle-time-max"] > 0:
            return True
    return False


def test_gateways_enforce_alone_while_the_quota_service_is_down(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, storage_nodes=1, metadata_nodes=1, gateways=1, quota_nodes=1)
    with cluster:
        cluster.create_topic("down", partitions=1)
        bootstrap = cluster.gateway_address
        quota = cluster.quota(1)
        quota.kill()
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            entity = QuotaEntity(None, "alone")
            admin.alter_client_quotas([(entity, {"producer_byte_rate": 20_000.0})])
        conf = {"bootstrap.servers": bootstrap, "client.id": "alone", "linger.ms": 0}
        gateway_log = Path(cluster.gateway(1).log_path)
        with Producer(conf) as producer:
            assert _throttled(producer, "down", 30)
            # the background reporter notices on its next report (every ~100 ms)
            deadline = time.monotonic() + 15
            while "unreachable" not in gateway_log.read_text():
                assert time.monotonic() < deadline, "the gateway never said the service is down"
                time.sleep(0.1)
            # More throttled traffic while it is down: each round of 50 kB is held ~2.5 s at
            # 20 kB/s, so three rounds span ~75 reports and ~150 produce requests (twenty
            # rounds, ~50 s, checked nothing more).
            for _ in range(3):
                for _ in range(50):
                    producer.send("down", b"d" * 1000)
                producer.flush(30)
        log = gateway_log.read_text()
        assert log.count("unreachable") == 1, log[-2000:]  # once, not per request or report
        quota.start(timeout=60)
        deadline = time.monotonic() + 15
        while "reachable again" not in Path(cluster.gateway(1).log_path).read_text():
            assert time.monotonic() < deadline, "the gateway never reached the new instance"
            time.sleep(0.2)
