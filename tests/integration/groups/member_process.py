"""A group member in its own process, for tests that SIGKILL one: it subscribes to TOPIC in
GROUP and, after each poll, commits what it read with commit_sync and prints a line on stdout:
`ASSIGNED <generation> <partitions>` after each rebalance and `COMMITTED p:offset,...` after
each commit, flushed at once so the test sees exactly what was committed before the kill.

    python member_process.py BOOTSTRAP TOPIC GROUP [DELAY_S [INSTANCE_ID]]

DELAY_S (default 0) is slept after each poll, so a test can kill it half-way through a topic.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Set

from riverlog.client import Consumer, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 300,
        "max.poll.records": 20,
    }
    delay_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    if len(sys.argv) > 5:
        conf["group.instance.id"] = sys.argv[5]
    consumer = Consumer(conf)

    class Report(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
            generation = consumer.group_metadata().generation_id
            owned = ",".join(str(tp.partition) for tp in sorted(consumer.assignment()))
            print(f"ASSIGNED {generation} {owned}", flush=True)

    consumer.subscribe([topic], listener=Report())
    while True:
        batches = consumer.poll(timeout_ms=200)
        time.sleep(delay_s)
        if not batches:
            continue
        offsets = {tp: OffsetAndMetadata(records[-1].offset + 1) for tp, records in batches.items()}
        consumer.commit_sync(offsets)
        done = ",".join(f"{tp.partition}:{o.offset}" for tp, o in sorted(offsets.items()))
        print(f"COMMITTED {done}", flush=True)


if __name__ == "__main__":
    main()
