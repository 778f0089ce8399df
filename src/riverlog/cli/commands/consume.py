"""`riverlog consume TOPIC`: the console consumer. It assigns every partition of the topic (or
only `--partition P`), starts where asked — the end by default, `--from-beginning`,
`--offset N` of one partition, or the first record at or after `--from-timestamp MS` — and
writes one value per line on stdout (optionally prefixed by timestamp, partition, offset and
key, in Kafka's formatter order).

Without `--follow` it stops once every partition reached the end offset it had when the
command started, or after `--timeout-ms` (default 30 s) without a new record, whichever comes
first. With `--follow` it runs until Ctrl-C, `--max-messages`, or `--timeout-ms` idle when
given. The count read goes to stderr, as Kafka's "Processed a total of N messages".
With `--group G` it joins the group instead of assigning partitions (`consume_group.py`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any, BinaryIO

from riverlog.client import Consumer, ConsumerRecord, TopicPartition

from ..connection import add_connection_args, client_config, describe_topic, key_value
from ..console import EXIT_OK, EXIT_USAGE, CliError
from .consume_group import isolation_option, run_group

DEFAULT_IDLE_TIMEOUT_MS = 30_000
POLL_MS = 200
NULL = b"null"


def offset_arg(text: str) -> int | str:
    """`--offset`: a non-negative number, `earliest` or `latest`."""
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an offset, earliest or latest: {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset is not negative: {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("consume", help="print a topic's records", description=__doc__)
    parser.add_argument("topic", metavar="TOPIC")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start")
    start.add_argument(
        "--offset", type=offset_arg, metavar="N", help="start at N (needs --partition)"
    )
    start.add_argument("--from-timestamp", type=int, metavar="MS", help="first record at/after MS")
    parser.add_argument("--partition", type=int, metavar="P", help="read only partition P")
    parser.add_argument(
        "--group", metavar="G", help="consume as a member of group G, committing as it goes"
    )
    parser.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    parser.add_argument("--timeout-ms", type=int, metavar="T", help="stop after T ms idle")
    parser.add_argument("--follow", action="store_true", help="keep reading new records")
    parser.add_argument("--print-key", action="store_true", help="print KEY SEP VALUE")
    parser.add_argument("--key-separator", default="\t", metavar="SEP", help="default: tab")
    parser.add_argument("--print-timestamp", action="store_true", help="prefix CreateTime:MS")
    parser.add_argument("--print-partition", action="store_true", help="prefix Partition:P")
    parser.add_argument("--print-offset", action="store_true", help="prefix Offset:N")
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        help="read_committed: only committed transactions' records, up to the last stable "
        "offset (default read_uncommitted, as Kafka)",
    )
    parser.add_argument(
        "--consumer-property",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any consumer setting by its Kafka name; repeatable",
    )
    add_connection_args(parser)
    parser.set_defaults(func=run)


def check_options(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition (an offset belongs to one partition)", 2)
    if args.max_messages is not None and args.max_messages < 1:
        raise CliError("--max-messages must be at least 1", EXIT_USAGE)
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise CliError("--timeout-ms must not be negative", EXIT_USAGE)
    if args.from_timestamp is not None and args.from_timestamp < 0:
        raise CliError("--from-timestamp must not be negative", EXIT_USAGE)


class RecordFormatter:
    """One output line per record: [CreateTime:MS SEP][Partition:P SEP][Offset:N SEP][KEY SEP]
    VALUE, bytes as stored (null for a null key or value)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.separator = str(args.key_separator).encode()
        self.print_key = bool(args.print_key)
        self.print_timestamp = bool(args.print_timestamp)
        self.print_partition = bool(args.print_partition)
        self.print_offset = bool(args.print_offset)

    def line(self, record: ConsumerRecord) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
            parts.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            parts.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            parts.append(f"Offset:{record.offset}".encode())
        if self.print_key:
            parts.append(NULL if record.key is None else bytes(record.key))
        parts.append(NULL if record.value is None else bytes(record.value))
        return self.separator.join(parts) + b"\n"


def start_positions(
    consumer: Consumer, tps: list[TopicPartition], args: argparse.Namespace
) -> None:
    """Seek every assigned partition to where the options say to start."""
    if args.from_beginning or args.offset == "earliest":
        consumer.seek_to_beginning(*tps)
    elif (args.offset is None and args.from_timestamp is None) or args.offset == "latest":
        consumer.seek_to_end(*tps)
    elif args.offset is not None:
        consumer.seek(tps[0], int(args.offset))
    else:
        found = consumer.offsets_for_times(dict.fromkeys(tps, args.from_timestamp))
        ends = consumer.end_offsets([tp for tp, hit in found.items() if hit is None])
        for tp in tps:
            hit = found.get(tp)
            consumer.seek(tp, hit.offset if hit is not None else ends[tp])


class Tally:
    """Records printed so far (kept outside `consume` so Ctrl-C does not lose the count)."""

    def __init__(self) -> None:
        self.count = 0


def consume(
    consumer: Consumer,
    tps: list[TopicPartition],
    args: argparse.Namespace,
    out: BinaryIO,
    tally: Tally | None = None,
) -> int:
    """Poll and print until a stop condition; returns the number of records printed."""
    tally = tally or Tally()
    formatter = RecordFormatter(args)
    ends = None if args.follow else consumer.end_offsets(tps)
    pending = set(tps)
    idle_ms = args.timeout_ms
    if idle_ms is None and not args.follow:
        idle_ms = DEFAULT_IDLE_TIMEOUT_MS
    last_progress = time.monotonic()
    while True:
        if ends is not None:
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
            if not pending:
                return tally.count
        if idle_ms is not None and (time.monotonic() - last_progress) * 1000 >= idle_ms:
            return tally.count
        batches = consumer.poll(timeout_ms=POLL_MS)
        if not batches:
            continue
        last_progress = time.monotonic()
        for records in batches.values():
            for record in _until_end(records, ends):
                out.write(formatter.line(record))
                tally.count += 1
                if args.max_messages is not None and tally.count >= args.max_messages:
                    out.flush()
                    return tally.count
        out.flush()


def _until_end(
    records: Iterable[ConsumerRecord], ends: dict[TopicPartition, int] | None
) -> Iterable[ConsumerRecord]:
    """Records before the end offset noted at start (all of them when following)."""
    for record in records:
        if (
            ends is not None
            and record.offset >= ends[TopicPartition(record.topic, record.partition)]
        ):
            continue
        yield record


def run(args: argparse.Namespace) -> int:
    if args.group:
        return run_group(args, RecordFormatter(args))
    check_options(args)
    options: list[tuple[str, str]] = [
        ("auto.offset.reset", "earliest"),
        *args.consumer_property,
        *isolation_option(args),
    ]
    conf = client_config(args, options)
    topic = describe_topic(conf, args.topic)
    partitions = [p.partition for p in topic.partitions]
    if args.partition is not None:
        if args.partition not in partitions:
            raise CliError(
                f"partition {args.partition} of topic {args.topic!r} does not exist "
                f"({len(partitions)} partitions)"
            )
        partitions = [args.partition]
    tps = [TopicPartition(args.topic, p) for p in partitions]
    tally = Tally()
    with Consumer(conf) as consumer:
        consumer.assign(tps)
        start_positions(consumer, tps, args)
        try:
            consume(consumer, tps, args, sys.stdout.buffer, tally)
        except KeyboardInterrupt:
            sys.stdout.flush()
    print(f"Processed a total of {tally.count} messages", file=sys.stderr)
    return EXIT_OK
