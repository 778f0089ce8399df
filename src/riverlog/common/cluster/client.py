"""An asyncio client of the metadata service with failover across its instances.

Every metadata instance serves reads and Watch and forwards writes to the controller, so a
caller may use any of them: a call that fails in transport (UNAVAILABLE, a deadline) or with
NOT_CONTROLLER moves on to the next instance, at most one round of retries per call with a short
pause between rounds. Every call carries a deadline. Failures come back as RiverlogError,
rebuilt by `from_rpc_error`, so callers never see grpc exceptions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Final

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channels import ChannelCache, Rpcs, pick
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import admin_pb2, common_pb2, metadata_pb2, metadata_pb2_grpc

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S: Final = 10.0
# Codes after which another instance may well answer.
_FAILOVER_CODES: Final = frozenset(
    {ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER}
)


METADATA_RPCS: Final[Rpcs[metadata_pb2_grpc.MetadataServiceAsyncStub]] = {
    "AllocateIncarnation": lambda s: s.AllocateIncarnation,
    "RegisterNode": lambda s: s.RegisterNode,
    "Heartbeat": lambda s: s.Heartbeat,
    "UnregisterNode": lambda s: s.UnregisterNode,
    "CreateTopics": lambda s: s.CreateTopics,
    "DeleteTopics": lambda s: s.DeleteTopics,
    "CreatePartitions": lambda s: s.CreatePartitions,
    "AlterConfigs": lambda s: s.AlterConfigs,
    "DescribeConfigs": lambda s: s.DescribeConfigs,
    "ListTopics": lambda s: s.ListTopics,
    "DescribeTopics": lambda s: s.DescribeTopics,
    "DescribeCluster": lambda s: s.DescribeCluster,
    "AlterPartition": lambda s: s.AlterPartition,
    "AllocateProducerIds": lambda s: s.AllocateProducerIds,
    "ElectLeaders": lambda s: s.ElectLeaders,
    "AlterPartitionReassignments": lambda s: s.AlterPartitionReassignments,
    "ListPartitionReassignments": lambda s: s.ListPartitionReassignments,
    "BalanceReplicas": lambda s: s.BalanceReplicas,
    "AlterNodeDraining": lambda s: s.AlterNodeDraining,
    "AlterClientQuotas": lambda s: s.AlterClientQuotas,
    "DescribeClientQuotas": lambda s: s.DescribeClientQuotas,
    "UpsertUser": lambda s: s.UpsertUser,
    "DeleteUser": lambda s: s.DeleteUser,
    "ListUsers": lambda s: s.ListUsers,
    "CreateAcls": lambda s: s.CreateAcls,
    "DescribeAcls": lambda s: s.DescribeAcls,
    "DeleteAcls": lambda s: s.DeleteAcls,
}
"""MetadataService's unary methods by name (`call` takes a name: the gateway passes admin
calls through, the controller forwarder passes writes on)."""


def parse_addresses(text: str | Sequence[str]) -> list[str]:
    """`"h:p,h:p"` (or a list of such strings) into a clean list of addresses."""
    items = [text] if isinstance(text, str) else list(text)
    out = [a.strip() for item in items for a in item.split(",") if a.strip()]
    if not out:
        raise ValueError("no metadata addresses given")
    return out


class MetadataClient:
    """Calls to the metadata service. Create and use on one event loop; `close()` at the end.

    The client sticks to the last instance that answered and moves on when it fails. Its
    list starts as the `--metadata` addresses and follows the live instances when a
    `MetadataWatcher` on it sees them change.
    """

    def __init__(self, addresses: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.addresses = parse_addresses(addresses)
        self.timeout_s = timeout_s
        self._current = 0
        self._channels: ChannelCache[metadata_pb2_grpc.MetadataServiceAsyncStub] = ChannelCache(
            metadata_pb2_grpc.MetadataServiceStub, "metadata instance"
        )

    @property
    def current_address(self) -> str:
        return self.addresses[self._current]

    def stub_for(self, address: str) -> metadata_pb2_grpc.MetadataServiceAsyncStub:
        return self._channels.stub_at(address)

    def use_addresses(self, addresses: Sequence[str]) -> None:
        """Fail over across `addresses` from now on: the live metadata instances as the
        cluster image names them, so an instance added later is used and a removed one is not
        tried (decision 0026). The current instance stays current if it is still listed; an
        empty list changes nothing (there is always one to try)."""
        fresh = [a for a in addresses if a]
        if not fresh or fresh == self.addresses:
            return
        current = self.current_address
        self.addresses = fresh
        self._current = fresh.index(current) if current in fresh else 0
        log.info("metadata instances now %s", ",".join(fresh))

    def advance(self) -> str:
        """Move to the next instance (after a failure); returns its address."""
        self._current = (self._current + 1) % len(self.addresses)
        return self.current_address

    async def close(self) -> None:
        await self._channels.close()

    async def call(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        """Unary `method` (a name in `METADATA_RPCS`) with failover; raises RiverlogError."""
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        last: RiverlogError | None = None
        for attempt in range(2 * len(self.addresses)):
            if attempt == len(self.addresses):
                await asyncio.sleep(0.2)  # a second round, after a pause (elections, restarts)
            address = self.current_address
            try:
                rpc = pick(METADATA_RPCS, self.stub_for(address), method)
                return await rpc(request, timeout=timeout)
            except grpc.RpcError as exc:
                last = from_rpc_error(exc)
            if last.code not in _FAILOVER_CODES:
                raise last
            log.debug("metadata %s failed on %s (%s); trying the next", method, address, last)
            self.advance()
        assert last is not None
        raise last

    def watch(self, watcher_id: int = -1) -> AsyncIterator[metadata_pb2.MetadataUpdate]:
        """One Watch stream on the current instance (no failover: the watcher reconnects)."""
        stub = self.stub_for(self.current_address)
        call = stub.Watch(metadata_pb2.WatchRequest(node_id=watcher_id))
        return _stream(call)

    # --- typed calls --------------------------------------------------------------------------

    async def register_node(
        self, request: metadata_pb2.RegisterNodeRequest
    ) -> metadata_pb2.RegisterNodeResponse:
        result: metadata_pb2.RegisterNodeResponse = await self.call("RegisterNode", request)
        return result

    async def allocate_incarnation(
        self, request: metadata_pb2.AllocateIncarnationRequest
    ) -> metadata_pb2.AllocateIncarnationResponse:
        result: metadata_pb2.AllocateIncarnationResponse = await self.call(
            "AllocateIncarnation", request
        )
        return result

    async def heartbeat(
        self,
        node_id: int,
        lease_id: int,
        timeout_s: float | None = None,
        offline_replicas: Iterable[common_pb2.TopicPartition] = (),
        replica_sizes: Iterable[metadata_pb2.ReplicaSize] = (),
    ) -> metadata_pb2.HeartbeatResponse:
        request = metadata_pb2.HeartbeatRequest(
            node_id=node_id,
            lease_id=lease_id,
            offline_replicas=offline_replicas,
            replica_sizes=replica_sizes,
        )
        result: metadata_pb2.HeartbeatResponse = await self.call("Heartbeat", request, timeout_s)
        return result

    async def unregister_node(
        self, node_id: int, lease_id: int
    ) -> metadata_pb2.UnregisterNodeResponse:
        request = metadata_pb2.UnregisterNodeRequest(node_id=node_id, lease_id=lease_id)
        result: metadata_pb2.UnregisterNodeResponse = await self.call("UnregisterNode", request)
        return result

    async def create_topics(
        self, request: admin_pb2.CreateTopicsRequest
    ) -> admin_pb2.CreateTopicsResponse:
        result: admin_pb2.CreateTopicsResponse = await self.call("CreateTopics", request)
        return result

    async def delete_topics(self, names: Sequence[str]) -> admin_pb2.DeleteTopicsResponse:
        request = admin_pb2.DeleteTopicsRequest(names=list(names))
        result: admin_pb2.DeleteTopicsResponse = await self.call("DeleteTopics", request)
        return result

    async def create_partitions(
        self, request: admin_pb2.CreatePartitionsRequest
    ) -> admin_pb2.CreatePartitionsResponse:
        result: admin_pb2.CreatePartitionsResponse = await self.call("CreatePartitions", request)
        return result

    async def alter_configs(
        self, request: admin_pb2.AlterConfigsRequest
    ) -> admin_pb2.AlterConfigsResponse:
        result: admin_pb2.AlterConfigsResponse = await self.call("AlterConfigs", request)
        return result

    async def describe_configs(self, topics: Sequence[str]) -> admin_pb2.DescribeConfigsResponse:
        request = admin_pb2.DescribeConfigsRequest(topics=list(topics))
        result: admin_pb2.DescribeConfigsResponse = await self.call("DescribeConfigs", request)
        return result

    async def list_topics(self, include_internal: bool = False) -> admin_pb2.ListTopicsResponse:
        request = admin_pb2.ListTopicsRequest(include_internal=include_internal)
        result: admin_pb2.ListTopicsResponse = await self.call("ListTopics", request)
        return result

    async def describe_topics(
        self, names: Sequence[str] = (), include_internal: bool = False
    ) -> admin_pb2.DescribeTopicsResponse:
        request = admin_pb2.DescribeTopicsRequest(
            names=list(names), include_internal=include_internal
        )
        result: admin_pb2.DescribeTopicsResponse = await self.call("DescribeTopics", request)
        return result

    async def describe_cluster(self) -> admin_pb2.DescribeClusterResponse:
        request = admin_pb2.DescribeClusterRequest()
        result: admin_pb2.DescribeClusterResponse = await self.call("DescribeCluster", request)
        return result


async def _stream(call: Any) -> AsyncIterator[metadata_pb2.MetadataUpdate]:
    """Iterate a server stream, turning grpc failures into RiverlogError; cancels on exit."""
    try:
        async for update in call:
            yield update
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None
    finally:
        call.cancel()
