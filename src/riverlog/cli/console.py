"""What a command writes: state on stdout — aligned tables and Kafka-style `Key: value` lines for
people, one JSON document (`--json`) for scripts — and failures on stderr as one clear line with
a non-zero exit status, never a traceback for a user's mistake or a cluster's refusal.

`report_error` turns any exception into (message, exit status): CliError for the command's own
checks, RiverlogError for what the cluster or the SDK refused (its code name leads the line),
ClusterError for the local launcher, OSError for files. Anything else is a bug: it still gets one
line, and the traceback only with RIVERLOG_DEBUG=1. Formatting functions return strings so tests
check them without a terminal.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TextIO

import grpc

from riverlog.cluster import ClusterError
from riverlog.common.errors import RiverlogError
from riverlog.common.rpc.status import from_rpc_error

PROG: Final = "riverlog"
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141
DEBUG_ENV: Final = "RIVERLOG_DEBUG"


class CliError(Exception):
    """A failure the command detected itself; `exit_code` 2 for bad usage, else 1."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def describe(error: BaseException) -> tuple[str, int]:
    """(one-line message, exit status) for an exception raised by a command."""
    if isinstance(error, CliError):
        return error.message, error.exit_code
    if isinstance(error, grpc.RpcError):
        error = from_rpc_error(error)
    if isinstance(error, RiverlogError):
        return f"{error.code.name}: {error.message}", EXIT_ERROR
    if isinstance(error, ClusterError):
        return str(error), EXIT_ERROR
    if isinstance(error, FileNotFoundError | PermissionError | IsADirectoryError):
        where = f" {error.filename}" if error.filename else ""
        return f"cannot open{where}: {error.strerror}", EXIT_ERROR
    if isinstance(error, ValueError):  # the SDK's ConfigError and bad values it rejects
        return str(error), EXIT_ERROR
    return f"internal error: {type(error).__name__}: {error}", EXIT_ERROR


def report_error(error: BaseException) -> int:
    """Print the error as one line on stderr (plus the traceback when debugging); return the
    exit status."""
    message, code = describe(error)
    first, _, rest = message.partition("\n")
    print(f"{PROG}: error: {first}", file=sys.stderr)
    if rest and isinstance(error, ClusterError):
        print(rest, file=sys.stderr)  # a process's log tail: worth showing, after the line
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(error, file=sys.stderr)
    return code


def to_json(document: Any) -> str:
    """Stable, readable JSON (sorted keys are not used: field order is the reading order)."""
    return json.dumps(document, indent=2, default=str)


def emit(text: str, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    stream.write(text if text.endswith("\n") or not text else text + "\n")
    stream.flush()


def cell(value: Any) -> str:
    """How a value shows in a table: lists comma-joined, None as '-', booleans as yes/no."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces; headers upper-cased."""
    cells = [[cell(v) for v in row] for row in rows]
    titles = [h.upper() for h in headers]
    widths = [len(t) for t in titles]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = ["  ".join(t.ljust(w) for t, w in zip(titles, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def fields(pairs: Mapping[str, Any], indent: str = "") -> str:
    """Kafka's describe style: `Key: value` pairs separated by tabs on one line."""
    return (indent + "\t".join(f"{k}: {cell(v)}" for k, v in pairs.items())).rstrip()


def configs_text(configs: Mapping[str, str]) -> str:
    """`k=v,k=v` as Kafka prints a topic's configs."""
    return ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
