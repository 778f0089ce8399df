"""Retries across a restarted storage node, on a cluster of the test's own (the session's must
not be disturbed): a third of the records is sent while a node that leads partitions is down,
so their batches fail and are retried until it is back; every send is acknowledged in the end,
and every acknowledged record reads back exactly once, where its metadata said."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path

import pytest

from riverlog.client import Consumer, Producer, RecordFuture, TopicPartition
from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 6
RECORDS = 3000
SENDER_LOG = "riverlog.client.producer.sender"


@pytest.mark.timeout(300)
def test_every_acknowledged_record_once_across_a_storage_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=SENDER_LOG)
    with LocalCluster(tmp_path, storage_nodes=3, metadata_nodes=1, gateways=1) as cluster:
        topic = "restart-test"
        cluster.create_topic(topic, PARTITIONS, 1)
        address = cluster.bootstrap_servers
        futures: list[tuple[int, RecordFuture]] = []
        config = {"acks": "all", "retry.backoff.ms": 50, "delivery.timeout.ms": 150_000}
        with Producer({"bootstrap.servers": address, **config}) as p:

            def send(start: int, stop: int) -> None:
                for i in range(start, stop):
                    futures.append((i, p.send(topic, b"%06d" % i, key=b"k%d" % i)))

            send(0, RECORDS // 3)
            p.flush(timeout=100)
            node = cluster.storage(2)
            node.stop()
            send(RECORDS // 3, 2 * RECORDS // 3)  # keyed: some land on the stopped node
            for _ in range(600):  # bounded: until a batch failed and was queued for a retry
                if any("retrying" in r.getMessage() for r in caplog.records):
                    break
                time.sleep(0.05)
            assert any("retrying" in r.getMessage() for r in caplog.records)
            node.restart(timeout=120)
            send(2 * RECORDS // 3, RECORDS)
            p.flush(timeout=160)
            metas = {i: f.result(0) for i, f in futures}  # every send acknowledged
        assert len(metas) == RECORDS

        tps = [TopicPartition(topic, i) for i in range(PARTITIONS)]
        got: list = []
        with Consumer(bootstrap_servers=address, auto_offset_reset="earliest") as consumer:
            consumer.assign(tps)
            for _ in range(400):
                for records in consumer.poll(timeout_ms=500).values():
                    got.extend(records)
                if len(got) >= RECORDS:
                    break
            end = consumer.end_offsets(tps)
        assert sum(end.values()) == RECORDS  # nothing written twice
        assert Counter(r.value for r in got) == Counter(b"%06d" % i for i in range(RECORDS))
        where = {r.value: (r.partition, r.offset) for r in got}
        for i, meta in metas.items():
            assert where[b"%06d" % i] == (meta.partition, meta.offset)
