"""One gRPC channel (and its stub) per peer, shared by every caller of one service in a process:
the only channel cache in Riverlog (gateways, coordinators and storage nodes call each other
through it; the metadata client and the controller forwarder through its by-address form).

A cluster node is keyed by (kind, node id) and known by its address and incarnation: a node
that comes back as a new incarnation (a restart, at the same address or another) gets a fresh
channel, so no reconnect backoff left over from the old process delays the first call to the
new one, and the old channel is closed in the background once its calls had a grace period to
end. `prune` closes the channels of nodes that left the cluster image, and `close` closes all.
A call in flight on a channel closed under it ends at once, not at its deadline, but grpc.aio
raises asyncio.CancelledError for it, not an RpcError: every peer client wraps its calls in
`closed_channel_raises(code, peer)`, which turns that into RiverlogError(code), a retriable
error of the caller's kind, when `channel_closed_under_call()` says so. A servicer that let it
escape would never answer its own client, which then waits out its whole request timeout; a
background loop that let it escape would end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError

from .channel import aio_channel

if TYPE_CHECKING:  # at run time the cluster package imports this module (its metadata client)
    from riverlog.common.cluster.image import ClusterImage, NodeInfo, NodeKey

log = logging.getLogger(__name__)

S = TypeVar("S")

Rpcs = Mapping[str, Callable[[S], Any]]
"""A service's unary methods by name, each picked off the typed stub (`lambda s: s.Fetch`), so
mypy checks every name against the generated stub: for callers that pass a method on by name
(routed group requests, admin passthrough, forwarding), instead of `getattr` on the stub."""

REPLACED_GRACE_S: Final = 5.0
"""How long calls on a replaced channel (the node restarted) may still run before it closes."""


@dataclass(frozen=True, slots=True)
class _Entry(Generic[S]):
    identity: tuple[str, int]  # (address, incarnation)
    channel: grpc.aio.Channel
    stub: S


class ChannelCache(Generic[S]):
    """Channels to the peers of one service, each with its stub (`make_stub(channel)`).

    Lifecycle: one per service called, per process; used from one event loop. `stub(node)` or
    `stub_at(address)` opens a channel on first use; `on_image` (a cluster-image listener) or
    `prune` drops departed nodes; `await close()` at stop.
    """

    def __init__(self, make_stub: Callable[[grpc.aio.Channel], S], name: str = "peer") -> None:
        self._make_stub = make_stub
        self._name = name
        self._entries: dict[NodeKey | str, _Entry[S]] = {}
        self._replaced: dict[grpc.aio.Channel, asyncio.Task[None]] = {}

    def stub(self, node: NodeInfo) -> S:
        """The stub for `node`'s current incarnation (a new channel when it restarted)."""
        return self._get(node.key, (node.address, node.incarnation))

    def stub_at(self, address: str) -> S:
        """The stub for a fixed `host:port` (bootstrap addresses, not cluster nodes)."""
        return self._get(address, (address, 0))

    def _get(self, key: NodeKey | str, identity: tuple[str, int]) -> S:
        entry = self._entries.get(key)
        if entry is not None and entry.identity == identity:
            return entry.stub
        if entry is not None:
            log.info("%s %s is now at %s (restarted)", self._name, key, identity[0])
            self._close_later(entry.channel)
        channel = aio_channel(identity[0])
        entry = self._entries[key] = _Entry(identity, channel, self._make_stub(channel))
        return entry.stub

    def __len__(self) -> int:
        return len(self._entries)

    async def prune(self, live: Iterable[NodeKey]) -> None:
        """Close the channels of nodes not in `live` (they left the cluster)."""
        keep = set(live)
        gone = [k for k in self._entries if isinstance(k, tuple) and k not in keep]
        for key in gone:
            await self._entries.pop(key).channel.close()

    async def on_image(self, old: ClusterImage, new: ClusterImage) -> None:
        """A cluster-image listener: prune when the set of nodes changed."""
        if old.nodes.keys() != new.nodes.keys():
            await self.prune(new.nodes.keys())

    async def close(self) -> None:
        entries, self._entries = self._entries, {}
        replaced, self._replaced = self._replaced, {}
        for channel in [e.channel for e in entries.values()] + list(replaced):
            await channel.close()
        await asyncio.gather(*replaced.values(), return_exceptions=True)

    def _close_later(self, channel: grpc.aio.Channel) -> None:
        """Close a replaced channel without making the caller wait (calls on it may still end
        for `REPLACED_GRACE_S`); `close()` ends it at once if it is still open then."""
        task = asyncio.get_running_loop().create_task(channel.close(grace=REPLACED_GRACE_S))
        self._replaced[channel] = task
        task.add_done_callback(lambda _: self._replaced.pop(channel, None))


def channel_closed_under_call() -> bool:
    """In an `except asyncio.CancelledError` around a peer call: True when the call, not the
    calling task, was cancelled, i.e. its channel was closed under it (`prune`: the node left
    the cluster; a restarted node's channel replaced); False when the caller itself is being
    cancelled, which must go on (re-raise)."""
    task = asyncio.current_task()
    return task is not None and not task.cancelling()


class closed_channel_raises:  # lower case: used like a function, as contextlib.suppress
    """`with closed_channel_raises(code, peer): await <a call on a ChannelCache stub>`: a call
    whose channel was closed under it (`channel_closed_under_call()`) raises
    RiverlogError(`code`) naming `peer` instead of asyncio.CancelledError; a caller that is
    itself being cancelled still is, and every other outcome passes through unchanged.

    `code` is the retriable error the caller acts on when the peer went away, in Kafka's
    names: COORDINATOR_NOT_AVAILABLE for a coordinator, NETWORK_EXCEPTION for a storage node
    (the router or fetcher tries the partition's leader again), NOT_CONTROLLER for the
    controller. A plain class, not a generator: it wraps calls on the request path."""

    __slots__ = ("_code", "_peer")

    def __init__(self, code: ErrorCode, peer: str) -> None:
        self._code = code
        self._peer = peer

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None or not issubclass(exc_type, asyncio.CancelledError):
            return
        if not channel_closed_under_call():
            return  # the caller itself is being cancelled: that goes on
        log.info("%s left the cluster or restarted during a call (%s)", self._peer, self._code.name)
        raise RiverlogError(
            f"{self._peer} left the cluster or restarted during the call", self._code
        ) from None


def pick(rpcs: Rpcs[S], stub: S, method: str) -> Any:
    """The multicallable for `method` on `stub`; RiverlogError(INVALID_REQUEST) for a name the
    table does not list."""
    try:
        return rpcs[method](stub)
    except KeyError:
        raise RiverlogError(
            f"{method} is not a method this call passes on", ErrorCode.INVALID_REQUEST
        ) from None
