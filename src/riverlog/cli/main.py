"""The `riverlog` command: administration, console producer and consumer, and a local cluster,
modelled on Kafka's tools (`kafka-topics.sh`, `kafka-console-producer.sh`, ...).

Each subcommand lives in its own module under `commands/` with `register(subparsers)`, which
adds its parser and sets `func(args) -> exit status`. `main()` parses, runs, and turns every
failure into one line on stderr and a non-zero status (`errors.py`); argparse reports bad usage
with status 2. Set RIVERLOG_DEBUG=1 for tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from riverlog import __version__

from .commands import (
    acls,
    cluster,
    configs,
    consume,
    dump_log,
    groups,
    leaders,
    log_dirs,
    partitions,
    produce,
    quotas,
    topics,
    transactions,
    users,
    web_console,
)
from .console import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, PROG, report_error

COMMANDS = (
    cluster,
    topics,
    configs,
    partitions,
    leaders,
    log_dirs,
    groups,
    transactions,
    quotas,
    users,
    acls,
    produce,
    consume,
    dump_log,
    web_console,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Riverlog: a distributed commit log. Commands that talk to the cluster "
        "find it through --bootstrap, $RIVERLOG_BOOTSTRAP, or the local cluster of "
        "`riverlog cluster up`.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush does not
    fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        return report_error(e)


if __name__ == "__main__":
    sys.exit(main())
