"""Prometheus `/metrics` of every process of one real cluster (decision 0033): scraped with a
real HTTP GET and parsed with prometheus-client's own parser. Traffic counters move when
records are produced and consumed, a group's lag served by its coordinator is what `riverlog
groups describe` shows (N - M after committing at M, 0 once consumed to the end), exactly one
metadata instance counts itself the active controller, and a client over its produce quota
shows up in the quota service's throttle time. One cluster for the module: two
metadata instances, two storage nodes, a coordinator, a quota instance and a gateway."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.metrics.catalog import CATALOG, family_of
from riverlog.common.quota.entity import QuotaEntity

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

WAIT_S = 30.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("metrics"),
        storage_nodes=2,
        metadata_nodes=2,
        gateways=1,
        coordinators=1,
        quota_nodes=1,
        extra_config={
            "metadata": {"offsets.topic.num.partitions": "4"},
            "coordinator": {"metrics.prometheus.lag.interval.ms": "200"},
        },
    ) as local:
        yield local


def scrape(url: str) -> Samples:
    """Every sample at `url`, by (name, sorted labels)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def urls(cluster: LocalCluster, role: str) -> list[str]:
    found = [p.metrics_url for p in cluster.by_role(role)]
    assert found and all(found), f"{role} processes without a metrics endpoint"
    return [u for u in found if u is not None]


def wait_for(check: Callable[[], object], what: str) -> object:
    deadline = time.monotonic() + WAIT_S
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_every_process_serves_catalog_names_and_one_active_controller(
    metrics_cluster: LocalCluster,
) -> None:
    for role in ("metadata", "storage", "coordinator", "quota", "gateway"):
        for url in urls(metrics_cluster, role):
            samples = scrape(url)
            ours = {name for name, _ in samples if name.startswith("riverlog_")}
            assert ours, f"{url} serves no riverlog_ metric"
            unknown = {name for name in ours if family_of(name) is None}
            assert not unknown, f"{url} serves names missing from the catalog: {unknown}"
            served_by = {family_of(n) for n in ours}
            for family in served_by:
                assert family is not None and role in CATALOG[family].served_by, (family, role)
            assert any(n.startswith("riverlog_request_duration_seconds") for n in ours)
    for process in metrics_cluster.by_role("storage"):
        assert process.metrics_url is not None and process.node_id is not None
        accepted = value(
            scrape(process.metrics_url),
            "riverlog_zero_copy_connections_total",
            node_id=str(process.node_id),
        )
        assert accepted is not None and accepted >= 0  # gateways' connections to its fast path

    def one_controller() -> bool:
        counts = [
            value(scrape(u), "riverlog_controller_active", instance_id=str(i))
            for i, u in enumerate(urls(metrics_cluster, "metadata"), start=1)
        ]
        return counts.count(1.0) == 1 and counts.count(0.0) == len(counts) - 1

    wait_for(one_controller, "exactly one active controller")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Prometheus) not installed")
def test_every_process_passes_promtool_check_metrics(metrics_cluster: LocalCluster) -> None:
    for role in ("metadata", "storage", "coordinator", "quota", "gateway"):
        for url in urls(metrics_cluster, role):
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read()
            done = subprocess.run(
                ["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60
            )
            assert done.returncode == 0, f"{url}: {done.stdout!r} {done.stderr!r}"


def describe_lags(cluster: LocalCluster, group: str, home: Path) -> dict[int, int]:
    """`riverlog groups describe --json`'s lag per partition (the real command)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIVERLOG_")}
    env |= {"RIVERLOG_HOME": str(home), "RIVERLOG_BOOTSTRAP": cluster.gateway_address}
    done = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", "groups", "describe", group, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {row["partition"]: row["lag"] for row in json.loads(done.stdout)["partitions"]}


def test_traffic_and_consumer_lag_match_groups_describe(
    metrics_cluster: LocalCluster, tmp_path: Path
) -> None:
    bootstrap = metrics_cluster.gateway_address
    topic = unique_topic_name("metrics-lag")
    group = f"{topic}-group"
    per_partition = 10
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        wait_for(
            lambda: all(p.leader >= 0 for p in admin.describe_topics([topic])[topic].partitions),
            "leaders",
        )
        # Through the gateway, whose per-topic traffic counters this checks (a direct
        # producer's records reach the leaders without passing it, decision 0047).
        producer = Producer(bootstrap_servers=bootstrap, linger_ms=0, direct_access=False)
        try:
            for i in range(2 * per_partition):
                producer.send(topic, value=b"v%03d" % i, partition=i % 2)
            producer.flush()
        finally:
            producer.close()
        (gateway_url,) = urls(metrics_cluster, "gateway")
        produced = scrape(gateway_url)
        assert value(produced, "riverlog_topic_records_in_total", topic=topic) == 20
        bytes_in = value(produced, "riverlog_topic_bytes_in_total", topic=topic)
        assert bytes_in is not None and bytes_in >= 20 * 4

        storage_urls = urls(metrics_cluster, "storage")
        producer_ids = sum(
            value(scrape(u), "riverlog_producer_ids", node_id=str(n)) or 0
            for n, u in enumerate(storage_urls, start=1)
        )
        assert producer_ids >= 1  # the SDK's producer is idempotent by default
        storage = [scrape(u) for u in storage_urls]
        for p in (0, 1):  # replication factor 1: one replica of each, on one of the nodes
            ends = [
                v
                for s in storage
                for (name, labels), v in s.items()
                if name == "riverlog_log_end_offset"
                and dict(labels).items() >= {("topic", topic), ("partition", str(p))}
            ]
            sizes = [
                v
                for s in storage
                for (name, labels), v in s.items()
                if name == "riverlog_log_size_bytes"
                and dict(labels).items() >= {("topic", topic), ("partition", str(p))}
            ]
            assert ends == [per_partition] and len(sizes) == 1 and sizes[0] > 0
        assert all(
            value(s, "riverlog_under_replicated_partitions", node_id=str(n)) == 0
            for n, s in enumerate(storage, start=1)
        )

        committed = {0: 3, 1: 7}
        admin.alter_group_offsets(
            group, {TopicPartition(topic, p): o for p, o in committed.items()}
        )
    expected = {p: per_partition - m for p, m in committed.items()}
    assert describe_lags(metrics_cluster, group, tmp_path) == expected

    (coordinator_url,) = urls(metrics_cluster, "coordinator")

    def served_lags() -> dict[int, float | None]:
        samples = scrape(coordinator_url)
        return {
            p: value(
                samples, "riverlog_consumer_group_lag", group=group, topic=topic, partition=str(p)
            )
            for p in (0, 1)
        }

    wait_for(lambda: served_lags() == expected, f"lag {expected} on {coordinator_url}")
    samples = scrape(coordinator_url)
    for p, m in committed.items():
        labels = {"group": group, "topic": topic, "partition": str(p)}
        assert value(samples, "riverlog_consumer_group_committed_offset", **labels) == m
    assert (value(samples, "riverlog_consumer_groups", state="Empty") or 0) >= 1

    # through the gateway, whose per-topic counters are checked below (a direct fetch,
    # decision 0047, passes the storage node's direct-port counters instead)
    consumer = Consumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, direct_access=False
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in (0, 1)])
        for p, m in committed.items():  # resume at the committed offsets
            consumer.seek(TopicPartition(topic, p), m)
        remaining = sum(expected.values())
        deadline = time.monotonic() + WAIT_S
        while remaining > 0:
            assert time.monotonic() < deadline, f"{remaining} records never came"
            remaining -= sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        consumer.commit_sync()
    finally:
        consumer.close()
    wait_for(lambda: served_lags() == {0: 0, 1: 0}, "lag 0 after consuming to the end")
    assert describe_lags(metrics_cluster, group, tmp_path) == {0: 0, 1: 0}

    fetched = scrape(gateway_url)
    assert (value(fetched, "riverlog_topic_records_out_total", topic=topic) or 0) >= 10
    assert (value(fetched, "riverlog_topic_bytes_out_total", topic=topic) or 0) > 0
    count = "riverlog_request_duration_seconds_count"
    # Produce and Fetch are timed per request, streams included, under Kafka's request names.
    assert (value(fetched, count, service="Gateway", api="Produce") or 0) >= 1
    assert (value(fetched, count, service="Gateway", api="Fetch") or 0) >= 1
    storage = [scrape(u) for u in urls(metrics_cluster, "storage")]
    assert sum(value(s, count, service="StorageService", api="Produce") or 0 for s in storage)
    assert sum(value(s, count, service="StorageService", api="FetchConsumer") or 0 for s in storage)


def test_a_throttled_client_shows_in_the_quota_throttle_time(
    metrics_cluster: LocalCluster,
) -> None:
    bootstrap = metrics_cluster.gateway_address
    client_id = f"{unique_topic_name('throttled')}-client"
    topic = unique_topic_name("metrics-throttle")
    metrics_cluster.create_topic(topic, 1, 1)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.alter_client_quotas([(QuotaEntity(None, client_id), {"producer_byte_rate": 10_000})])
    conf = {"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 100}
    with Producer({**conf, "batch.size": 2_000_000}) as producer:
        # one request of 400 kB against 10 kB/s: accepted, then the client is held for seconds
        producer.send_many(topic, [b"x" * 20_000 for _ in range(20)], partition=0)
        producer.flush(60)
    (quota_url,) = urls(metrics_cluster, "quota")

    def held_ms() -> float:
        return max(
            (
                v
                for (name, labels), v in scrape(quota_url).items()
                if name == "riverlog_client_throttle_time_ms"
                and dict(labels) == {"quota_type": "produce", "user": "", "client_id": client_id}
            ),
            default=0.0,
        )

    assert wait_for(lambda: held_ms() > 0, f"a produce throttle for {client_id}")
