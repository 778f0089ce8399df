"""`riverlog dump-log PATH [PATH ...] [--print-records]`: print a segment file's batches (and
with `--print-records` each record), an index, a producer snapshot or a leader-epoch
checkpoint, as Kafka's `kafka-dump-log.sh`; a remote segment's objects (tiered storage) too.
The storage service owns the formats, so this command only calls `riverlog.services.storage.dump`
— the one service module the CLI may import — and writes the lines it yields.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from ..console import EXIT_OK, CliError, emit

DUMP_MODULE = "riverlog.services.storage.dump"

DumpSegment = Callable[..., Iterable[str]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print the batches of a segment file", description=__doc__
    )
    parser.add_argument(
        "paths",
        type=Path,
        nargs="+",
        metavar="PATH",
        help="a segment (.log), index, producer snapshot or leader-epoch checkpoint file; "
        "several are dumped one after the other (Kafka's --files a,b)",
    )
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
    paths: list[Path] = args.paths
    for path in paths:
        if not path.exists():
            raise CliError(f"no such file: {path}")
        if path.is_dir():
            raise CliError(f"{path} is a directory: give segment files (NNNN.log)")
    dump_segment = load_dump_segment()
    for path in paths:
        for line in dump_segment(path, records=args.print_records):
            emit(line)
    return EXIT_OK
