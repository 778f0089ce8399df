"""The lifecycle every service process shares, and the one of registered nodes on top of it.

Every service's `app.py` builds one process object (`start()`, `stop()`, `address`) and serves
it with `serve_process`: start it, write the ready file (`{"pid", "address", ...}`, which the
local-cluster launcher reads), serve until told to stop (or until the service's own `serving`
hook returns), and stop it on the way out, whatever happened (with `metrics.prometheus.port` set
it also serves `/metrics` and adds `metrics_address` and `metrics_scheme`, http or https under
internal TLS, to the ready file: decision 0033). The metadata service uses it as it is; storage
adds its fencing wait as the hook. Registered nodes
with nothing more to parse (gateway, coordinator, quota) go through `run_node`: the `--node-id`
command line, the config type parsed from `--config key=value` by its `from_overrides`, and
serving until SIGTERM or until a newer incarnation of the same node id fences this one
(`fenced`, checked every second). Start-up failures (RiverlogError) exit with status 1."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from riverlog.common.cluster import parse_addresses
from riverlog.common.errors import RiverlogError
from riverlog.common.gctune import freeze_startup_objects
from riverlog.common.metrics import endpoint as metrics_endpoint
from riverlog.common.metrics.settings import take_prometheus_settings
from riverlog.common.rpc import tls as rpc_tls
from riverlog.common.service import base_arg_parser, parse_overrides, run, write_ready_file

log = logging.getLogger(__name__)

FENCE_CHECK_S = 1.0

C = TypeVar("C")
P = TypeVar("P", bound="NodeProcess")


class Fenceable(Protocol):
    @property
    def fenced(self) -> bool:
        """True once a newer incarnation of this node id took over its registration."""
        ...


class ServiceProcess(Protocol):
    """A service's components as one object. Lifecycle: `await start()` (returns once
    serving), then `await stop()` (also after a failed or interrupted start)."""

    @property
    def address(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class NodeProcess(ServiceProcess, Fenceable, Protocol):
    """A registered node's components as one object: `start()` returns once serving and
    registered."""


@dataclass(frozen=True, slots=True)
class NodeOptions(Generic[C]):
    """A node process's command line, its settings parsed into the service's config type."""

    node_id: int
    host: str
    port: int
    metadata: list[str]
    ready_file: str | None
    config: C
    advertised: str | None = None  # --advertised-host; None: the bind host

    @property
    def advertised_host(self) -> str:
        """The host registered for other processes to connect to."""
        return self.advertised or self.host


def parse_service_overrides(items: list[str]) -> dict[str, str]:
    """A service process's `--config` items as a dict, with the internal TLS settings every
    service shares (`rpc/tls.py`: security.inter.broker.protocol, listener.name.internal.ssl.*;
    `metrics/settings.py`: metrics.prometheus.*) taken out and installed for the whole process;
    what is returned is the service's own.
    ValueError naming a bad item; RiverlogError(INVALID_CONFIG) for bad TLS or metrics settings
    or an unreadable PEM file."""
    internal, rest = rpc_tls.split_overrides(parse_overrides(items))
    rpc_tls.install(internal)
    # under internal TLS /metrics is HTTPS with the same certificate (decision 0035, addendum)
    certificate = internal.files if internal.enabled else None
    metrics_endpoint.configure(take_prometheus_settings(rest, certificate))  # decision 0033
    return rest


def parse_node_args(
    kind: str,
    config_from_overrides: Callable[[Mapping[str, str]], C],
    argv: Sequence[str] | None = None,
    *,
    node_id_help: str,
) -> tuple[NodeOptions[C], str]:
    """The process options and the log level; exits with a usage message on bad input."""
    parser = base_arg_parser(kind)
    parser.add_argument("--node-id", type=int, required=True, help=node_id_help)
    args = parser.parse_args(argv)
    try:
        config = config_from_overrides(parse_service_overrides(args.config))
        metadata = parse_addresses(args.metadata)
    except (ValueError, RiverlogError) as exc:
        parser.error(str(exc))
    if args.node_id < 0:
        parser.error("--node-id must not be negative")
    options = NodeOptions(
        args.node_id,
        args.host,
        args.port,
        metadata,
        args.ready_file,
        config,
        advertised=args.advertised_host,
    )
    return options, str(args.log_level)


async def until_stopped_or_fenced(
    process: Fenceable, stop: asyncio.Event, tick: Callable[[], None] | None = None
) -> bool:
    """Wait for `stop`, checking every second whether `process` was fenced (and calling
    `tick()` after each check); returns whether it was fenced."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), FENCE_CHECK_S)
        if process.fenced:
            return True
        if tick is not None:
            tick()
    return False


async def until_stopped(work: Awaitable[None], stop: asyncio.Event) -> bool:
    """Run `work` unless `stop` is set first (the work is then cancelled); returns whether the
    work completed. Its exceptions propagate."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


async def serve_process(
    process: ServiceProcess,
    stop: asyncio.Event,
    *,
    label: str,
    ready_file: str | None,
    ready_info: Callable[[], Mapping[str, object]] = dict,
    serving: Callable[[], Awaitable[None]] | None = None,
    interruptible_start: bool = False,
) -> None:
    """Start `process`, announce it in the ready file (its address and `ready_info()`), serve
    (`serving()`; default: until `stop`), stop it whatever happened. With `interruptible_start`
    a `stop` during `start()` cancels it (then no ready file). `label` names it in logs."""
    try:
        if not interruptible_start:
            await process.start()
        elif not await until_stopped(process.start(), stop):
            log.info("%s stopped before it was serving", label)
            return
        info = {"address": process.address, **ready_info()}
        metrics_address = metrics_endpoint.start(process.address.rpartition(":")[0])
        if metrics_address is not None:
            info["metrics_address"] = metrics_address
            info["metrics_scheme"] = metrics_endpoint.scheme()  # https under TLS
        freeze_startup_objects()  # full collections skip what start-up made (gctune.py)
        write_ready_file(ready_file, info)
        await (stop.wait() if serving is None else serving())
    finally:
        log.info("%s stopping", label)
        await process.stop()
        metrics_endpoint.stop()


async def serve_node(
    process: NodeProcess,
    options: NodeOptions[C],
    stop: asyncio.Event,
    *,
    label: str,
    tick: Callable[[], None] | None = None,
) -> None:
    """Start `process`, announce it in the ready file, serve until stopped or fenced, stop it."""
    name = f"{label} {options.node_id}"

    async def until_fenced() -> None:
        if await until_stopped_or_fenced(process, stop, tick):
            log.error("%s was replaced by a newer incarnation; exiting", name)

    await serve_process(
        process,
        stop,
        label=name,
        ready_file=options.ready_file,
        ready_info=lambda: {"node_id": options.node_id},
        serving=until_fenced,
    )


def run_node(
    kind: str,
    options: NodeOptions[C],
    make_process: Callable[[NodeOptions[C]], P],
    *,
    label: str | None = None,
    tick: Callable[[P], None] | None = None,
) -> None:
    """Run the node until SIGTERM/SIGINT (logging already set up); exits with status 1 when
    start-up is refused (no metadata, node id taken, ...). `label` names the node in logs
    (default: `kind`); `tick(process)` runs about once a second while it serves."""
    name = label or kind

    async def serve(stop: asyncio.Event) -> None:
        process = make_process(options)
        each_second = (lambda: tick(process)) if tick is not None else None
        await serve_node(process, options, stop, label=name, tick=each_second)

    try:
        run(serve, f"riverlog-{kind}")
    except RiverlogError as exc:
        log.error("%s %d cannot run: %s", name, options.node_id, exc)
        sys.exit(1)
