"""Consumer-group and transaction requests: each goes to the coordinator instance that owns
the group's `__consumer_offsets` partition (abs(javaHash(group)) % partitions, owner from the
controller's assignment in the cluster image), as Kafka clients go to the group coordinator, or
the transactional id's `__transaction_state` partition (owned with `__consumer_offsets`
partition that mod its count, decision 0028). The first transactional request asks the
metadata service to create `__transaction_state`, as Kafka's brokers create it on the first
FindCoordinator of a transactional id.

The gateway hides coordinator moves from clients: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS (answered before the coordinator changed anything) are retried
against the newest image until the request's deadline; what is left is returned to the client
in the response's error_code. ListGroups asks every live coordinator; DescribeGroups and
DeleteGroups are split per group. FindCoordinator is answered from the image alone. Requests
and responses pass through opaque (`GroupAnswer`: any message with `error_code` and
`error_message`); building and merging them is `rpc/groups.py`'s work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol, TypeVar

from riverlog.common.cluster.image import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import GatewayConfig
from .context import Deadline
from .routing.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class GroupAnswer(Protocol):
    """A coordinator's response, as far as routing cares."""

    error_code: Any
    error_message: str


_A = TypeVar("_A", bound=GroupAnswer)


class CoordinatorCaller(Protocol):
    """What the router needs of `peers.coordinator.CoordinatorPeers` (tests pass a fake):
    `method` on a coordinator, RiverlogError when it cannot be reached."""

    async def call(self, node: NodeInfo, method: str, request: Any, timeout_s: float) -> Any: ...


class GroupRouter:
    """Stateless apart from the metadata cache and the coordinator channels; one per gateway."""

    def __init__(
        self,
        cache: MetadataCache,
        peers: CoordinatorCaller,
        config: GatewayConfig,
        create_transaction_topic: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.cache = cache
        self.peers = peers
        self.config = config
        self.create_transaction_topic = create_transaction_topic
        self._creating: asyncio.Task[None] | None = None

    async def call(
        self,
        key: str,
        method: str,
        request: Any,
        response_type: Callable[[], _A],
        deadline: Deadline,
        transactional: bool = False,
    ) -> _A:
        """`method` on the coordinator of group `key` (`transactional`: of transactional id
        `key`), retried on moves until `deadline`; a response of `response_type` carrying the
        last error when no coordinator answered."""
        backoff = self.config.retry_backoff_s
        topic = TRANSACTION_STATE_TOPIC if transactional else OFFSETS_TOPIC
        error = RiverlogError(f"{topic} does not exist yet", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        while True:
            image = self.cache.image
            if transactional:
                partition, node = image.transaction_coordinator_for(key)
                if partition < 0:
                    self.call_soon_create_transaction_topic()
            else:
                _, node = image.coordinator_for(key)
            if node is not None:
                try:
                    response: _A = await self.peers.call(
                        node, method, request, deadline.remaining()
                    )
                except RiverlogError as exc:
                    error = exc
                else:
                    code = ErrorCode(response.error_code) if response.error_code in _CODES else None
                    if code not in RETRIABLE:
                        return response
                    error = RiverlogError(response.error_message or None, code)
            if error.code == ErrorCode.REQUEST_TIMED_OUT or deadline.remaining() <= backoff:
                break
            await self.cache.wait_newer(image.version, backoff)
            await asyncio.sleep(min(backoff, deadline.remaining()) / 2)
            backoff = min(backoff * 2, self.config.retry_backoff_max_s)
        log.info("%s %s: %s gave up: %s", topic, key, method, error)
        out = response_type()
        out.error_code = int(error.code)
        out.error_message = error.message
        return out

    def call_soon_create_transaction_topic(self) -> None:
        """Ask the metadata service for `__transaction_state`, once at a time and in the
        background (the caller waits for the image, or retries FindCoordinator)."""
        create = self.create_transaction_topic
        if create is None or (self._creating is not None and not self._creating.done()):
            return
        self._creating = asyncio.create_task(create(), name="create-transaction-state")
        self._creating.add_done_callback(_log_failure)

    def coordinators(self) -> list[NodeInfo]:
        """The live coordinator instances (ListGroups asks each)."""
        return self.cache.image.nodes_of_kind("coordinator")


_CODES: Final = frozenset(int(c) for c in ErrorCode)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, task.exception())
