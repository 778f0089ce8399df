"""The transactions fault test's copier, a process of its own (so it can be SIGKILLed and
SIGSTOPped): Kafka's consume-transform-produce loop. It reads topic A read_committed in group
G, writes each record to the same partition of topic B in a transaction with G's offsets, and
commits; an abortable error aborts and rewinds to the committed offsets; a fatal one (fenced
by the next copier or by the transaction timeout) exits 3, and the test starts another.

Every attempt is logged, one JSON line per event, flushed at once, with monotonic times
(comparable across processes on Linux): {"attempt", "event": "begin" | "sent" | "asked" |
"committed" | "aborted", "at"}; between "sent" and "asked" the transaction is open for
`--hold-s`, the window the test aims its faults at. It stops once it has been `--idle-s` seconds
without a record *and* the group's committed offsets reach the end of every one of the
`--partitions` source partitions: an idle spell alone (a rebalance, a coordinator moving) must
not end it before everything was copied.

    python txn_copier.py BOOTSTRAP SOURCE DEST GROUP TXN_ID LOG --partitions N [--batch N]
        [--idle-s S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import IO

from txn_checker import output_value

from riverlog.client import Consumer, Producer
from riverlog.client.producer.transaction_state import FatalTransactionError
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

FATAL_EXIT = 3


def log_event(out: IO[str], attempt: str, event: str) -> None:
    out.write(json.dumps({"attempt": attempt, "event": event, "at": time.monotonic()}) + "\n")
    out.flush()


def rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets: what an aborted transaction read is read again."""
    assignment = consumer.assignment()
    committed = consumer.committed(assignment)
    for tp in assignment:
        c = committed.get(tp)
        if c is not None:
            consumer.seek(tp, c.offset)
        else:
            consumer.seek_to_beginning(tp)


def caught_up(consumer: Consumer, tps: list[TopicPartition]) -> bool:
    """The group has committed up to the end offset of every source partition."""
    try:
        ends = consumer.end_offsets(tps, timeout_ms=5000)
        committed = consumer.committed(tps, timeout_ms=5000)
    except RiverlogError:
        return False
    return all((c := committed.get(tp)) is not None and c.offset >= ends[tp] for tp in tps)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "source", "dest", "group", "txn_id", "log"):
        parser.add_argument(name)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--txn-timeout-ms", type=int, default=4000)
    parser.add_argument("--hold-s", type=float, default=0.3, help="open after writing")
    args = parser.parse_args()
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.txn_id,
            "transaction.timeout.ms": args.txn_timeout_ms,
            "request.timeout.ms": 10000,
            "delivery.timeout.ms": 30000,
        }
    )
    n = 0
    with open(args.log, "a", encoding="utf-8") as out:
        try:
            producer.init_transactions(timeout=60)
            consumer.subscribe([args.source])
            source = [TopicPartition(args.source, p) for p in range(args.partitions)]
            idle_since = time.monotonic()
            while True:
                polled = consumer.poll(500, max_records=args.batch)
                records = [(tp, r) for tp, rs in polled.items() for r in rs]
                if not records:
                    if time.monotonic() - idle_since >= args.idle_s:
                        if caught_up(consumer, source):
                            break
                        idle_since = time.monotonic()
                    continue
                idle_since = time.monotonic()
                n += 1
                attempt = f"{os.getpid()}-{n}"
                log_event(out, attempt, "begin")
                try:
                    producer.begin_transaction()
                    for tp, r in records:
                        value = output_value(tp.partition, r.offset, attempt, len(records))
                        producer.send(args.dest, value, partition=tp.partition)
                    producer.flush()  # written (uncommitted): the transaction is Ongoing
                    log_event(out, attempt, "sent")
                    time.sleep(args.hold_s)  # a window for the test's faults
                    positions: dict[TopicPartition, int] = {}
                    for tp, r in records:
                        positions[tp] = max(positions.get(tp, 0), r.offset + 1)
                    producer.send_offsets_to_transaction(positions, consumer.group_metadata())
                    log_event(out, attempt, "asked")
                    producer.commit_transaction(timeout=30)
                    log_event(out, attempt, "committed")
                except FatalTransactionError:
                    raise
                except RiverlogError as e:
                    print(f"copier: attempt {attempt} aborts: {e}", file=sys.stderr, flush=True)
                    producer.abort_transaction(timeout=30)
                    log_event(out, attempt, "aborted")
                    rewind(consumer)
        except FatalTransactionError as e:
            print(f"copier: fenced, exiting: {e}", file=sys.stderr, flush=True)
            return FATAL_EXIT
        finally:
            consumer.close()
            producer.close(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
