"""What every service process shares: command-line basics (settings by Kafka name), logging,
and running an asyncio main until SIGTERM/SIGINT with a graceful stop."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping

from riverlog.common import tracing
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.malloc import tune_malloc
from riverlog.common.watchdog import LoopWatchdog


def base_arg_parser(service: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m riverlog.services.{service}")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (and advertise)")
    parser.add_argument("--port", type=int, default=0, help="gRPC port (0: any free port)")
    parser.add_argument(
        "--advertised-host",
        default=None,
        help="host other processes reach this one at, when it differs from --host "
        "(e.g. --host 0.0.0.0 in a container); default: --host",
    )
    parser.add_argument(
        "--metadata",
        default=os.environ.get("RIVERLOG_METADATA", "127.0.0.1:9093"),
        help="comma-separated metadata service addresses",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting by its Kafka name; repeatable",
    )
    parser.add_argument("--ready-file", help="write the bound address here once serving")
    parser.add_argument("--log-level", default=os.environ.get("RIVERLOG_LOG_LEVEL", "INFO"))
    return parser


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`key=value` strings into a dict; raises ValueError naming the bad item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def int_settings(
    service: str,
    config_type: type,
    overrides: Mapping[str, str],
    *,
    minimum: int,
    too_small: str,
) -> dict[str, int]:
    """`--config` overrides of a settings dataclass whose fields are all integers, by Kafka
    name (the attribute is the key with dots as underscores), as keyword arguments for it.
    RiverlogError(INVALID_CONFIG) for an unknown key, a value that is not an integer, or one
    below `minimum` (the message then ends with `too_small`)."""
    known = {f.name.replace("_", "."): f.name for f in dataclasses.fields(config_type)}
    values: dict[str, int] = {}
    for key, raw in overrides.items():
        attr = known.get(key)
        if attr is None:
            raise RiverlogError(
                f"unknown {service} setting {key!r} (one of {', '.join(sorted(known))})",
                ErrorCode.INVALID_CONFIG,
            )
        try:
            value = int(raw)
        except ValueError:
            raise RiverlogError(
                f"invalid value {raw!r} for {key}: expected an integer",
                ErrorCode.INVALID_CONFIG,
            ) from None
        if value < minimum:
            raise RiverlogError(
                f"invalid value {raw!r} for {key}: {too_small}", ErrorCode.INVALID_CONFIG
            )
        values[attr] = value
    return values


def setup_logging(level: str, name: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s",
        stream=sys.stderr,
    )


def write_ready_file(path: str | None, info: dict[str, object]) -> None:
    """Announce readiness atomically as JSON (at least "address" and "pid"): launchers poll
    for this file."""
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), **info}, f)
    os.replace(tmp, path)


EVENT_LOOP_ENV = "RIVERLOG_EVENT_LOOP"


def enable_crash_traces() -> None:
    """A native crash (SIGSEGV, SIGABRT, ...) writes every thread's Python stack to stderr (the
    process's log) instead of dying without a trace, and SIGUSR1 dumps the stacks on demand
    (`kill -USR1 PID` on a process that seems stuck)."""
    faulthandler.enable(all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def run(main: Callable[[asyncio.Event], Awaitable[None]], service_name: str) -> None:
    """Run `main(stop_event)` until it returns; SIGTERM/SIGINT set the event. The event loop
    runs under a watchdog that logs, with its stack, any stall of a second or more."""
    enable_crash_traces()
    tune_malloc()
    tracing.configure_tracing(service_name)
    tracing.configure_metrics(service_name)

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        watchdog = LoopWatchdog(loop, service_name)
        watchdog.start()
        try:
            await main(stop)
        finally:
            watchdog.stop()

    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as loop_runner:
            loop_runner.run(runner())
    finally:
        tracing.shutdown()


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (it runs the loop, sockets and timers in C: less CPU per request;
    gRPC's asyncio API works on it), else asyncio's own loop. `RIVERLOG_EVENT_LOOP=asyncio`
    forces asyncio's loop (for comparison, or to rule uvloop out when chasing a bug)."""
    if os.environ.get(EVENT_LOOP_ENV, "uvloop").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
