"""`riverlog produce TOPIC`: the console producer. One record per line of stdin (the line ending
is not part of the value); with `--key-separator SEP`, the text before the first SEP is the key,
as Kafka's `parse.key=true` + `key.separator`.

It exits 0 only when every record was acknowledged: each send's outcome is collected (a
delivery callback), the producer is flushed, and the first failure is printed as one line with
exit status 1. With `--acks 0` nothing is acknowledged, so success means "sent".
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from riverlog.client import Producer

from ..connection import add_connection_args, client_config, describe_topic, key_value
from ..console import EXIT_OK, CliError

ACKS = ("0", "1", "all", "-1")
COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
FLUSH_TIMEOUT_S = 300.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "produce", help="send stdin lines as records to a topic", description=__doc__
    )
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into key SEP value")
    parser.add_argument("--acks", choices=ACKS, default="all", help="default: all")
    parser.add_argument("--compression", choices=COMPRESSION, default="none", help="codec")
    parser.add_argument("--partition", type=int, metavar="P", help="send every record to P")
    parser.add_argument("--linger-ms", type=int, default=5, help="batching delay (linger.ms)")
    parser.add_argument(
        "--producer-property",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any producer setting by its Kafka name; repeatable",
    )
    add_connection_args(parser)
    parser.set_defaults(func=run)


def split_line(line: bytes, separator: bytes | None, number: int) -> tuple[bytes | None, bytes]:
    """(key, value) of one input line without its line ending. Without a separator the key is
    None; a line that lacks the separator is an error naming its number, as in Kafka."""
    line = line.rstrip(b"\n").removesuffix(b"\r")
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:
        raise CliError(f"line {number} has no key separator {separator.decode()!r}")
    return key, value


def read_records(stream: BinaryIO, separator: str | None) -> Iterator[tuple[bytes | None, bytes]]:
    sep = separator.encode() if separator is not None else None
    for number, line in enumerate(stream, 1):
        yield split_line(line, sep, number)


class DeliveryTally:
    """Outcomes of every send, filled on the producer's sender thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acknowledged = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def __call__(self, metadata: object, error: BaseException | None) -> None:
        with self._lock:
            if error is None:
                self.acknowledged += 1
                return
            self.failed += 1
            if self.first_error is None:
                self.first_error = error


def producer_config(args: argparse.Namespace) -> dict[str, object]:
    """The Producer's configuration: the options, then `--producer-property` overrides."""
    options = [
        ("acks", args.acks),
        ("compression.type", args.compression),
        ("linger.ms", str(args.linger_ms)),
        *args.producer_property,
    ]
    return client_config(args, options)


def produce(
    producer: Producer,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    partition: int | None,
) -> int:
    """Send every record, flush, and check each outcome; returns the count sent."""
    tally = DeliveryTally()
    sent = 0
    try:
        for key, value in records:
            producer.send(topic, value, key=key, partition=partition, callback=tally)
            sent += 1
    finally:
        producer.flush(timeout=FLUSH_TIMEOUT_S)
    if tally.first_error is not None:
        raise tally.first_error
    if tally.acknowledged != sent:
        raise CliError(f"only {tally.acknowledged} of {sent} records were acknowledged")
    return sent


def run(args: argparse.Namespace) -> int:
    if args.key_separator == "":
        raise CliError("--key-separator must not be empty")
    conf = producer_config(args)
    partitions = len(describe_topic(conf, args.topic).partitions)
    if args.partition is not None and not 0 <= args.partition < partitions:
        raise CliError(
            f"partition {args.partition} of topic {args.topic!r} does not exist "
            f"({partitions} partitions)"
        )
    records = read_records(sys.stdin.buffer, args.key_separator)
    with Producer(conf) as producer:
        sent = produce(producer, args.topic, records, args.partition)
    print(f"produced {sent} records to {args.topic}", file=sys.stderr)
    return EXIT_OK
