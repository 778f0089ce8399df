"""What idempotence costs: SDK produce throughput with enable.idempotence on and off (acks=all
both), against a local cluster (etcd, one metadata instance, three storage nodes, one gateway).
Prints figures; not a test.

Each round sends N records of 100-byte values without keys to a topic of 6 partitions
(replication factor 1) and reports records/s from the first send to the end of `flush()`, and
how many batches the sender retried (OUT_OF_ORDER_SEQUENCE_NUMBER among them: requests that
reached the leader out of order on separate HTTP/2 streams). Rounds alternate off/on, so a
noisy machine shows in both columns.

    .venv/bin/python bench/idempotence_bench.py [--records 200000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

from riverlog.client import Producer
from riverlog.cluster import LocalCluster

VALUE = b"x" * 100
SENDER_LOG = "riverlog.client.producer.sender"


class RetryCounter(logging.Handler):
    """Counts the sender's "retrying" debug lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retries = 0
        self.out_of_order = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "retrying" in message:
            self.retries += 1
            self.out_of_order += "OUT_OF_ORDER" in message


def produce(address: str, topic: str, records: int, idempotent: bool) -> float:
    with Producer(
        bootstrap_servers=address, acks="all", linger_ms=5, enable_idempotence=idempotent
    ) as producer:
        start = time.perf_counter()
        for _ in range(records):
            producer.send(topic, VALUE)
        producer.flush()
        return records / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    counter = RetryCounter()
    sender_log = logging.getLogger(SENDER_LOG)
    sender_log.setLevel(logging.DEBUG)
    sender_log.addHandler(counter)
    with tempfile.TemporaryDirectory() as root, LocalCluster(root, storage_nodes=3) as cluster:
        cluster.create_topic("idempotence-bench", 6, 1)
        for round_ in range(args.rounds):
            for idempotent in (False, True):
                counter.retries = counter.out_of_order = 0
                rate = produce(
                    cluster.bootstrap_servers, "idempotence-bench", args.records, idempotent
                )
                print(
                    f"round {round_ + 1}, enable.idempotence={str(idempotent).lower():5}: "
                    f"{rate:,.0f} records/s, {counter.retries} retried batches "
                    f"({counter.out_of_order} out of order)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
