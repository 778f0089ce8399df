"""The metadata service's AllocateProducerIds, as a source of producer-id blocks for the
gateways (idempotent producers) and the transaction coordinators (transactional ones).

A node asks as the registered node it is (node id and incarnation), so the controller can
refuse a zombie. A node that has just started may ask before its registration is visible to
the controller, and a controller may be changing hands: such refusals are tried again, with a
growing pause, for up to `patience_s`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.v1 import metadata_pb2

from ..producer_ids import BlockSource, ProducerIdBlock

log = logging.getLogger(__name__)


class MetadataCaller(Protocol):
    """What this needs of `MetadataClient` (tests pass a fake)."""

    async def call(self, method: str, request: Any, timeout_s: float | None = None) -> Any: ...


_AGAIN: Final = frozenset({ErrorCode.STALE_BROKER_EPOCH, ErrorCode.UNKNOWN_NODE})


def block_source(
    client: MetadataCaller,
    node_id: int,
    incarnation: Callable[[], int],
    timeout_s: float = 10.0,
    patience_s: float = 15.0,
) -> BlockSource:
    """A BlockSource calling AllocateProducerIds as node `node_id`."""

    async def allocate() -> ProducerIdBlock:
        deadline = time.monotonic() + patience_s
        pause = 0.1
        while True:
            request = metadata_pb2.AllocateProducerIdsRequest(
                node_id=node_id, node_incarnation=incarnation()
            )
            try:
                response = await client.call("AllocateProducerIds", request, timeout_s=timeout_s)
                if response.error_code != ErrorCode.NONE:
                    raise error_for(response.error_code, response.error_message)
                return ProducerIdBlock(response.producer_id_start, response.producer_id_len)
            except RiverlogError as exc:
                again = exc.retriable or exc.code in _AGAIN
                if not again or time.monotonic() + pause > deadline:
                    raise
                log.info("AllocateProducerIds refused (%s); trying again", exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    return allocate
