"""`riverlog dump-log PATH [--print-records]`: print a segment file's batches (and with
`--print-records` each record), as Kafka's `kafka-dump-log.sh`. The storage service's log layer
owns the format, so this command only calls `riverlog.services.storage.log.dump` — the one
service module the CLI may import — and writes the lines it yields.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from ..console import EXIT_OK, CliError, emit

DUMP_MODULE = "riverlog.services.storage.log.dump"

DumpSegment = Callable[..., Iterable[str]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print the batches of a segment file", description=__doc__
    )
    parser.add_argument("path", type=Path, metavar="PATH", help="a segment (.log) or index file")
    parser.add_argument("--print-records", action="store_true", help="also print every record")
    parser.set_defaults(func=run)


def load_dump_segment() -> DumpSegment:
    """The storage layer's `dump_segment`, imported on use (the CLI needs no storage code for
    anything else)."""
    try:
        module = importlib.import_module(DUMP_MODULE)
    except ImportError as e:
        raise CliError(f"dump-log is unavailable: cannot import {DUMP_MODULE} ({e})") from None
    return cast(DumpSegment, module.dump_segment)


def run(args: argparse.Namespace) -> int:
    path: Path = args.path
    if not path.exists():
        raise CliError(f"no such file: {path}")
    if path.is_dir():
        raise CliError(f"{path} is a directory: give one segment file (NNNN.log)")
    dump_segment = load_dump_segment()
    for line in dump_segment(path, records=args.print_records):
        emit(line)
    return EXIT_OK
