"""Send per-partition work to partition leaders: group by leader, call leaders in parallel, merge
results in request order, and retry only the partitions whose route turned out stale.

Every data-plane family (produce, fetch, list offsets, delete records, plain records) goes
through `Router.dispatch`. A partition is retried when its leader said it is not the leader (or
does not host it), when its leader could not be reached, or when the cache shows no leader: the
request then waits for a NEWER metadata image that routes one of those partitions elsewhere
(pushed by the watcher; a backoff bounds the wait so a leader that merely lags behind the
gateway's metadata is retried too, and other metadata changes do not cut the backoff short)
and routes again,
until the request deadline, when the last answer stands. Partitions with no leader wait at most
`max.block.ms`; unknown topics and partitions answer at once. UNKNOWN_LEADER_EPOCH is retried
only while the leader lags behind the epoch this gateway routed by: an item whose own
`current_leader_epoch` is newer than that gets the answer at once (as a Kafka leader gives it),
since no re-route can satisfy it before the client refreshes its metadata.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol, TypeVar

from riverlog.common.cluster.image import ClusterImage, NodeInfo, NodeKey
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..config import GatewayConfig
from ..context import Deadline, measured
from .metadata_cache import MetadataCache, Route

log = logging.getLogger(__name__)

# Answers from a leader (or failures to reach it) that mean "ask again once routes moved".
RETRY_CODES: Final = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
    }
)


class Routed(Protocol):
    """A request item addressed to one partition."""

    @property
    def tp(self) -> TopicPartition: ...


class Answered(Protocol):
    """A per-partition result with a wire error code."""

    @property
    def error_code(self) -> int: ...


ItemT = TypeVar("ItemT", bound=Routed)
ResultT = TypeVar("ResultT", bound=Answered)

SendFn = Callable[[NodeInfo, list[ItemT], Deadline], Awaitable[list[ResultT]]]
"""Call one leader with its items; results aligned with the items. Raises RiverlogError when
the whole call failed (unreachable node, deadline)."""

RouteFn = Callable[[TopicPartition], Route]
"""Where an item goes; the leader's route (`MetadataCache.route`) unless a fetch reads from a
preferred read replica (decision 0038)."""

ErrorFn = Callable[[ItemT, RiverlogError], ResultT]
"""The result standing for an item that got `error` instead of an answer."""


class _Group:
    """The items of one request that go to one leader."""

    __slots__ = ("epochs", "indexes", "node")

    def __init__(self, node: NodeInfo) -> None:
        self.node = node
        self.indexes: list[int] = []
        self.epochs: list[int] = []  # the leader epoch each item was routed by


class Router:
    """Routes items by the metadata cache. Stateless beyond its collaborators; any task of the
    gateway's event loop may call it concurrently."""

    def __init__(self, cache: MetadataCache, config: GatewayConfig) -> None:
        self.cache = cache
        self.config = config

    def group(
        self, items: Sequence[Routed], indexes: Sequence[int], route_fn: RouteFn | None = None
    ) -> tuple[list[_Group], dict[int, RiverlogError]]:
        """Items at `indexes` by leader node (groups in first-seen order, indexes ascending), and
        the items that have no route with why."""
        groups: dict[NodeKey, _Group] = {}
        errors: dict[int, RiverlogError] = {}
        find = route_fn or self.cache.route
        for index in indexes:
            try:
                route = find(items[index].tp)
            except RiverlogError as exc:
                errors[index] = exc
                continue
            group = groups.get(route.node.key)
            if group is None:
                group = groups[route.node.key] = _Group(route.node)
            group.indexes.append(index)
            group.epochs.append(route.leader_epoch)
        return list(groups.values()), errors

    async def dispatch(
        self,
        items: Sequence[ItemT],
        send: SendFn[ItemT, ResultT],
        on_error: ErrorFn[ItemT, ResultT],
        deadline: Deadline,
        route_fn: RouteFn | None = None,
        may_retry: Callable[[ItemT], bool] | None = None,
    ) -> list[ResultT]:
        """One result per item, in item order; `route_fn` routes instead of the leaders. An
        item `may_retry` refuses (asked before each retry) keeps the answer it got."""
        results: dict[int, ResultT] = {}
        pending = list(range(len(items)))
        block_deadline = deadline.earlier(self.config.max_block_s)
        backoff = self.config.retry_backoff_s
        attempt = 0
        while pending:
            version = self.cache.version
            groups, route_errors = self.group(items, pending, route_fn)
            retry: list[int] = []
            for index, error in route_errors.items():
                results[index] = on_error(items[index], error)
                if error.code == ErrorCode.LEADER_NOT_AVAILABLE and not block_deadline.expired:
                    retry.append(index)
            if len(groups) == 1:  # the common case: no task to spawn
                only = groups[0]
                outcomes = [
                    await self._call(send, only.node, [items[i] for i in only.indexes], deadline)
                ]
            elif groups:
                outcomes = await asyncio.gather(
                    *(
                        measured(self._call(send, g.node, [items[i] for i in g.indexes], deadline))
                        for g in groups
                    )
                )
            else:
                outcomes = []
            for group, outcome in zip(groups, outcomes, strict=True):
                self._collect(items, group, outcome, on_error, results, retry)
            if may_retry is not None:
                retry = [i for i in retry if may_retry(items[i])]
            if not retry or deadline.expired:
                break
            attempt += 1
            budget = deadline.remaining()
            wait_s = min(backoff, budget)
            moved = self._moved_check(items, version, retry, groups, route_fn)
            waited = await self.cache.wait_until(moved, wait_s)
            if not waited:
                if wait_s >= budget:
                    # The wait took the request's whole remaining time: it was the last.
                    # (`Deadline` keeps whole milliseconds, so the clock is past it by now
                    # anyway; this does not depend on how the clock moved during the wait.)
                    break
                backoff = min(backoff * 2, self.config.retry_backoff_max_s)
            if deadline.expired:
                break
            log.debug(
                "retrying %d partitions (attempt %d, metadata %d -> %d)",
                len(retry),
                attempt,
                version,
                self.cache.version,
            )
            pending = sorted(retry)
            if may_retry is not None:  # asked again: a later request may have come meanwhile
                pending = [i for i in pending if may_retry(items[i])]
        return [results[i] for i in range(len(items))]

    def _moved_check(
        self,
        items: Sequence[ItemT],
        version: int,
        retry: Sequence[int],
        groups: Sequence[_Group],
        route_fn: RouteFn | None,
    ) -> Callable[[ClusterImage], bool]:
        """A predicate: the image is newer than `version` and routes one of `retry` elsewhere
        than `groups` did (another node or leader epoch, or a route where there was none). Only
        then does a retry skip the backoff (as Kafka's producer does since KIP-951): a new image
        that leaves these routes as they were (another topic created, an ISR change) must not
        resend them at once."""
        routed: dict[int, tuple[NodeKey, int]] = {}
        for group in groups:
            for index, epoch in zip(group.indexes, group.epochs, strict=True):
                routed[index] = (group.node.key, epoch)
        find = route_fn or self.cache.route

        def moved(image: ClusterImage) -> bool:
            if image.version <= version:
                return False
            for index in retry:
                try:
                    route = find(items[index].tp)  # by the cache's image, which is `image`
                except RiverlogError:
                    continue  # still (or now) no route: nothing to resend to yet
                if routed.get(index) != (route.node.key, route.leader_epoch):
                    return True
            return False

        return moved

    @staticmethod
    def _collect(
        items: Sequence[ItemT],
        group: _Group,
        outcome: list[ResultT] | RiverlogError,
        on_error: ErrorFn[ItemT, ResultT],
        results: dict[int, ResultT],
        retry: list[int],
    ) -> None:
        if isinstance(outcome, RiverlogError):
            log.info("storage node %d (%s): %s", group.node.node_id, group.node.address, outcome)
            for index in group.indexes:
                results[index] = on_error(items[index], outcome)
                if outcome.code in RETRY_CODES:
                    retry.append(index)
            return
        for index, epoch, result in zip(group.indexes, group.epochs, outcome, strict=True):
            results[index] = result
            if result.error_code in RETRY_CODES and not _ahead(items[index], epoch, result):
                retry.append(index)

    @staticmethod
    async def _call(
        send: SendFn[ItemT, ResultT], node: NodeInfo, batch: list[ItemT], deadline: Deadline
    ) -> list[ResultT] | RiverlogError:
        try:
            results = await send(node, batch, deadline)
        except RiverlogError as exc:
            return exc
        except Exception as exc:  # a bug in a peer: fail these partitions, not the process
            log.exception("call to storage node %d failed unexpectedly", node.node_id)
            return RiverlogError(
                f"internal error: {type(exc).__name__}", ErrorCode.UNKNOWN_SERVER_ERROR
            )
        if len(results) != len(batch):
            return RiverlogError(
                f"storage node {node.node_id} answered {len(results)} of {len(batch)} partitions",
                ErrorCode.UNKNOWN_SERVER_ERROR,
            )
        return results


def _ahead(item: Routed, routed_epoch: int, result: Answered) -> bool:
    """UNKNOWN_LEADER_EPOCH for an item claiming an epoch newer than the one it was routed by."""
    claimed = getattr(item, "current_leader_epoch", None)
    return (
        result.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        and claimed is not None
        and claimed > routed_epoch
    )


def merge(
    size: int, answered: dict[int, ResultT], routed: Sequence[int], results: Sequence[ResultT]
) -> list[ResultT]:
    """Request-order results from those answered locally (by index) and those routed (the
    items at `routed`, in that order)."""
    out = dict(answered)
    out.update(zip(routed, results, strict=True))
    return [out[i] for i in range(size)]
