"""Topic administration passed through to the metadata service, unchanged.

The gateway adds nothing to these calls but a deadline (the request's remaining time) and
failover across metadata instances, which the shared `MetadataClient` provides: requests and
responses are the metadata service's own messages, so a new field in admin.proto reaches the
client without a gateway change.
"""

from __future__ import annotations

from typing import Any, Final

from riverlog.common.cluster import MetadataClient
from riverlog.common.errors import ErrorCode, RiverlogError

from ..context import Deadline

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
}


class MetadataPeer:
    """Admin calls on the metadata service. Lifecycle: owned by the app, which closes the
    underlying client; used from the gateway's event loop."""

    def __init__(self, client: MetadataClient) -> None:
        self.client = client

    async def call(self, method: str, request: Any, deadline: Deadline) -> Any:
        """The metadata service's response to `request`; RiverlogError when it cannot be had
        (the instances unreachable, the deadline passed, or the service refused the call)."""
        target = PASSTHROUGH.get(method)
        if target is None:
            raise RiverlogError(f"{method} is not an admin call", ErrorCode.INVALID_REQUEST)
        timeout = deadline.remaining()
        if timeout <= 0:
            raise RiverlogError(
                f"the deadline passed before {method} could be sent", ErrorCode.REQUEST_TIMED_OUT
            )
        return await self.client.call(target, request, timeout_s=timeout)
