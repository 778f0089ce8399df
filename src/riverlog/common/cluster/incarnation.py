"""A node process's incarnation, from etcd rather than the wall clock (decision 0003).

A registration meeting a live one of the same (kind, id) replaces it when its incarnation is
at least as high and is refused (NODE_ID_IN_USE) when lower. An incarnation taken from
`time.time_ns()` went backwards with the clock: a process restarted after an NTP step back
was refused and exited (the clock-leader-10m-restart fault scenario, issue 12). The metadata
service's AllocateIncarnation answers with the revision of an etcd put, which only grows, so
every service asks it once per process, before it registers, through this one function.
"""

from __future__ import annotations

import asyncio
import logging

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.v1 import metadata_pb2

from .client import MetadataClient
from .convert import kind_to_proto

log = logging.getLogger(__name__)

_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 2.0


async def allocate_incarnation(client: MetadataClient, kind: str, node_id: int) -> int:
    """A new incarnation for this process of (kind, node_id), retrying with backoff while
    the metadata service is unreachable; raises RiverlogError for a refusal."""
    request = metadata_pb2.AllocateIncarnationRequest(
        kind=kind_to_proto(kind),  # type: ignore[arg-type]
        node_id=node_id,
    )
    backoff = _BACKOFF_START_S
    while True:
        try:
            response = await client.allocate_incarnation(request)
            if int(response.error_code) != ErrorCode.NONE:
                raise error_for(response.error_code, response.error_message)
            log.info("%s node %d: incarnation %d", kind, node_id, response.incarnation)
            return int(response.incarnation)
        except RiverlogError as exc:
            if not exc.retriable:
                raise
            log.info("no incarnation for %s node %d yet (%s); retrying", kind, node_id, exc)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, _BACKOFF_MAX_S)
