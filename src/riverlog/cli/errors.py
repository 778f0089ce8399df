"""How the `riverlog` command fails: one clear line on stderr and a non-zero exit status, never a
traceback for a user's mistake or a cluster's refusal.

`report_error` turns any exception into (message, exit status): CliError for the command's own
checks, RiverlogError for what the cluster or the SDK refused (its code name leads the line),
ClusterError for the local launcher, OSError for files. Anything else is a bug: it still gets one
line, and the traceback only with RIVERLOG_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Final

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
