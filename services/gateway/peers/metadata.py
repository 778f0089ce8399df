"""Topic administration passed through to the metadata service, unchanged.

The gateway adds nothing to these calls but a deadline (the request's remaining time), failover
across metadata instances (the shared `MetadataClient`), and patience: when no instance can be
reached (all restarting, or a channel still in its reconnect backoff) the call is tried again,
with a growing pause, until the request deadline. Requests and responses are the metadata
service's own messages, so a new field in admin.proto reaches the client without a gateway
change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final, Protocol

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2

from ..config import GatewayConfig
from ..context import Deadline

log = logging.getLogger(__name__)

# Gateway method name → MetadataService method name (the same today, kept explicit).
PASSTHROUGH: Final = {
    "CreateTopics": "CreateTopics",
    "DeleteTopics": "DeleteTopics",
    "CreatePartitions": "CreatePartitions",
    "AlterConfigs": "AlterConfigs",
    "DescribeConfigs": "DescribeConfigs",
    "ListTopics": "ListTopics",
    "DescribeTopics": "DescribeTopics",
    "DescribeCluster": "DescribeCluster",
    "ElectLeaders": "ElectLeaders",
    "AlterPartitionReassignments": "AlterPartitionReassignments",
    "ListPartitionReassignments": "ListPartitionReassignments",
    "BalanceReplicas": "BalanceReplicas",
    "AlterNodeDraining": "AlterNodeDraining",
    "AlterClientQuotas": "AlterClientQuotas",
    "DescribeClientQuotas": "DescribeClientQuotas",
    "UpsertUser": "UpsertUser",
    "DeleteUser": "DeleteUser",
    "ListUsers": "ListUsers",
    "CreateAcls": "CreateAcls",
    "DescribeAcls": "DescribeAcls",
    "DeleteAcls": "DeleteAcls",
}

# No instance answered at all: the request cannot have been applied, so it is safe to resend.
_UNREACHED: Final = frozenset({ErrorCode.NETWORK_EXCEPTION})


class MetadataCaller(Protocol):
    """What this peer needs of `MetadataClient` (tests pass a fake)."""

    async def call(self, method: str, request: Any, timeout_s: float | None = None) -> Any: ...


class MetadataPeer:
    """Admin calls on the metadata service. Lifecycle: owned by the app, which closes the
    underlying client; used from the gateway's event loop."""

    def __init__(self, client: MetadataCaller, config: GatewayConfig) -> None:
        self.client = client
        self.config = config

    async def call(self, method: str, request: Any, deadline: Deadline) -> Any:
        """The metadata service's response to `request`; RiverlogError when it cannot be had
        (no instance reachable until the deadline, or the service refused the call)."""
        target = PASSTHROUGH.get(method)
        if target is None:
            raise RiverlogError(f"{method} is not an admin call", ErrorCode.INVALID_REQUEST)
        backoff = self.config.retry_backoff_s
        while True:
            timeout = deadline.remaining()
            if timeout <= 0:
                raise RiverlogError(
                    f"the deadline passed before {method} could be sent",
                    ErrorCode.REQUEST_TIMED_OUT,
                )
            try:
                return await self.client.call(target, request, timeout_s=timeout)
            except RiverlogError as exc:
                if exc.code not in _UNREACHED or deadline.remaining() <= backoff:
                    raise
                log.info("%s: no metadata instance reachable (%s); trying again", method, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_s)

    async def create_internal_topic(self, name: str) -> None:
        """CreateTopics of an internal topic with the metadata service's settings for it
        (every value -1); an existing topic is no error."""
        request = admin_pb2.CreateTopicsRequest(
            topics=[admin_pb2.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1)]
        )
        deadline = Deadline.after(self.config.request_timeout_s)
        response = await self.call("CreateTopics", request, deadline)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise RiverlogError(result.error_message or None, ErrorCode(result.error_code))
