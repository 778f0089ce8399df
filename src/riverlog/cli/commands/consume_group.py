"""`riverlog consume TOPIC --group G`: the console consumer as a member of a consumer group.

It subscribes to the topic, prints the partitions the group assigns and revokes on stderr (the
values stay alone on stdout), and commits exactly what it printed: asynchronously after each
batch, synchronously when partitions are revoked and on exit (auto commit is off, so a record
fetched but not printed — past `--max-messages` — is never committed). Where a partition with
no committed offset starts is auto.offset.reset: latest, or earliest with `--from-beginning`.
It stops after `--max-messages`, after `--timeout-ms` without a record (default 30 s unless
`--follow`), or on Ctrl-C (handled between records, so what was printed is what gets
committed), and leaves the group cleanly in every case.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator, Set
from contextlib import contextmanager
from typing import BinaryIO, TextIO

from riverlog.client import (
    Consumer,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
    RiverlogError,
    TopicPartition,
)

from ..connection import client_config
from ..console import EXIT_OK, EXIT_USAGE, CliError

POLL_MS = 200
DEFAULT_IDLE_TIMEOUT_MS = 30_000
NULL = b"null"


def check_group_options(args: argparse.Namespace) -> None:
    for option, value in (
        ("--partition", args.partition),
        ("--offset", args.offset),
        ("--from-timestamp", args.from_timestamp),
    ):
        if value is not None:
            raise CliError(f"{option} cannot be used with --group (the group assigns)", EXIT_USAGE)


class Printed:
    """The next offset to commit per partition: one past the last record printed."""

    def __init__(self) -> None:
        self.offsets: dict[TopicPartition, int] = {}
        self.count = 0

    def take(self, partitions: Set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Offsets not committed yet (of `partitions`, or all), forgotten once taken."""
        keys = [tp for tp in self.offsets if partitions is None or tp in partitions]
        return {tp: self.offsets.pop(tp) for tp in keys}


class Reporter(ConsumerRebalanceListener):
    """Prints assignment changes on stderr; commits what was printed of revoked partitions."""

    def __init__(self, consumer: Consumer, printed: Printed, err: TextIO) -> None:
        self.consumer = consumer
        self.printed = printed
        self.err = err

    def _say(self, what: str, partitions: Set[TopicPartition]) -> None:
        names = ", ".join(str(tp) for tp in sorted(partitions)) or "none"
        print(f"{what} partitions: {names}", file=self.err, flush=True)

    def on_partitions_revoked(self, partitions: Set[TopicPartition]) -> None:
        commit(self.consumer, self.printed.take(partitions), self.err)
        self._say("Revoked", partitions)

    def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
        self._say("Assigned", partitions)

    def on_partitions_lost(self, partitions: Set[TopicPartition]) -> None:
        self.printed.take(partitions)  # another member owns them now: never commit
        self._say("Lost", partitions)


def commit(consumer: Consumer, offsets: dict[TopicPartition, int], err: TextIO) -> None:
    if not offsets:
        return
    try:
        consumer.commit_sync({tp: OffsetAndMetadata(o) for tp, o in offsets.items()})
    except RiverlogError as e:
        print(f"commit failed: {e}", file=err, flush=True)


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """The first Ctrl-C (SIGINT) sets the event, so the loop stops between records and the
    command commits what it printed and leaves; a second one interrupts at once."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def interrupted(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def consume_group(
    consumer: Consumer,
    args: argparse.Namespace,
    line: object,
    out: BinaryIO,
    printed: Printed,
    stop: threading.Event | None = None,
) -> int:
    """Poll and print until a stop condition (or `stop` is set); returns the number of
    records printed."""
    format_line = line.line  # type: ignore[attr-defined]
    stop = stop or threading.Event()
    idle_ms = args.timeout_ms
    if idle_ms is None and not args.follow:
        idle_ms = DEFAULT_IDLE_TIMEOUT_MS
    last_progress = time.monotonic()
    while not stop.is_set():
        if idle_ms is not None and (time.monotonic() - last_progress) * 1000 >= idle_ms:
            return printed.count
        batches = consumer.poll(timeout_ms=POLL_MS)
        if not batches:
            continue
        last_progress = time.monotonic()
        for tp, records in batches.items():
            for record in records:
                out.write(format_line(record))
                printed.offsets[tp] = record.offset + 1
                printed.count += 1
                if args.max_messages is not None and printed.count >= args.max_messages:
                    out.flush()
                    return printed.count
        out.flush()
        pending = printed.take()
        if pending:
            consumer.commit_async({tp: OffsetAndMetadata(o) for tp, o in pending.items()})
    return printed.count


def isolation_option(args: argparse.Namespace) -> list[tuple[str, str]]:
    """--isolation-level as the consumer setting (it wins over --consumer-property)."""
    level = getattr(args, "isolation_level", None)
    return [] if level is None else [("isolation.level", level)]


def run_group(args: argparse.Namespace, formatter: object) -> int:
    check_group_options(args)
    reset = "earliest" if args.from_beginning else "latest"
    options: list[tuple[str, str]] = [
        ("auto.offset.reset", reset),
        *args.consumer_property,
        *isolation_option(args),
        ("group.id", args.group),
        ("enable.auto.commit", "false"),
    ]
    conf = client_config(args, options)
    printed = Printed()
    consumer = Consumer(conf)
    try:
        consumer.subscribe([args.topic], listener=Reporter(consumer, printed, sys.stderr))
        with stop_on_interrupt() as stop:
            consume_group(consumer, args, formatter, sys.stdout.buffer, printed, stop)
        sys.stdout.flush()
        commit(consumer, printed.take(), sys.stderr)
    finally:
        consumer.close()
    print(f"Processed a total of {printed.count} messages", file=sys.stderr)
    return EXIT_OK
