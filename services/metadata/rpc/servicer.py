"""The MetadataService servicer: thin handlers that convert protos, call the domain (registry,
topic controller, image) and convert back.

Reads and Watch are served from this instance's image. Writes run here when this instance is
the controller, and are forwarded to the controller otherwise (once: see `peers/controller`).
Per-topic problems travel in per-topic results; whole-request failures are raised as
RiverlogError and mapped by the shared interceptor.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from riverlog.common.cluster.convert import (
    delta_to_proto,
    kind_from_proto,
    node_from_proto,
    tps_from_proto,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.common.types import TopicPartition
from riverlog.v1 import acls_pb2, admin_pb2, metadata_pb2, metadata_pb2_grpc

from ..controller.cluster import NodeRegistry
from ..controller.draining import DrainingController
from ..controller.election import ControllerElection
from ..controller.node_configs import NodeConfigController
from ..controller.producer_ids import ProducerIdManager
from ..controller.replication import ReplicationController
from ..controller.topic_validation import is_internal
from ..controller.topics import TopicController
from ..image import MetadataImage
from ..peers.controller import ControllerPeer, was_forwarded
from . import convert as conv
from .acls import AclsRpc
from .balancer import BalancerRpc
from .client_quotas import ClientQuotasRpc
from .reassignments import ReassignmentsRpc

log = logging.getLogger(__name__)

R = TypeVar("R")


class MetadataServicer(ClientQuotasRpc, metadata_pb2_grpc.MetadataServiceServicer):
    reassignments: ReassignmentsRpc  # set by the app, as client_quotas
    node_configs: NodeConfigController  # set by the app
    balancer: BalancerRpc  # set by the app
    draining: DrainingController  # set by the app
    acls: AclsRpc  # set by the app

    def __init__(
        self,
        image: MetadataImage,
        election: ControllerElection,
        topics: TopicController,
        registry: NodeRegistry,
        peer: ControllerPeer,
        replication: ReplicationController,
        producer_ids: ProducerIdManager,
    ) -> None:
        self.image = image
        self.election = election
        self.topics = topics
        self.registry = registry
        self.peer = peer
        self.replication = replication
        self.producer_ids = producer_ids

    # --- membership ---------------------------------------------------------------------------

    async def AllocateIncarnation(
        self, request: metadata_pb2.AllocateIncarnationRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.AllocateIncarnationResponse:
        async def allocate() -> metadata_pb2.AllocateIncarnationResponse:
            try:
                kind = kind_from_proto(request.kind)
            except ValueError as exc:
                raise RiverlogError(str(exc), ErrorCode.INVALID_REQUEST) from None
            incarnation = await self.registry.allocate_incarnation(kind, request.node_id)
            return metadata_pb2.AllocateIncarnationResponse(incarnation=incarnation)

        return await conv.answer_or_error(
            metadata_pb2.AllocateIncarnationResponse, allocate(), raised=conv.UNREACHED
        )

    async def RegisterNode(
        self, request: metadata_pb2.RegisterNodeRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.RegisterNodeResponse:
        async def register() -> metadata_pb2.RegisterNodeResponse:
            try:
                granted = await self.registry.register(node_from_proto(request.node))
            except ValueError as exc:
                raise RiverlogError(str(exc), ErrorCode.INVALID_REQUEST) from None
            return metadata_pb2.RegisterNodeResponse(
                lease_id=granted.lease_id,
                lease_ttl_ms=granted.lease_ttl_ms,
                heartbeat_interval_ms=granted.heartbeat_interval_ms,
                cluster_id=granted.cluster_id,
            )

        return await conv.answer_or_error(
            metadata_pb2.RegisterNodeResponse, register(), raised=conv.UNREACHED
        )

    async def Heartbeat(
        self, request: metadata_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.HeartbeatResponse:
        async def heartbeat() -> metadata_pb2.HeartbeatResponse:
            offline = tps_from_proto(request.offline_replicas)
            sizes = {
                TopicPartition(r.topic, r.partition): r.size_bytes for r in request.replica_sizes
            }
            ttl = await self.registry.heartbeat(request.node_id, request.lease_id, offline, sizes)
            return metadata_pb2.HeartbeatResponse(lease_ttl_ms=ttl)

        return await conv.answer_or_error(
            metadata_pb2.HeartbeatResponse, heartbeat(), raised=conv.UNREACHED
        )

    async def UnregisterNode(
        self, request: metadata_pb2.UnregisterNodeRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.UnregisterNodeResponse:
        async def unregister() -> metadata_pb2.UnregisterNodeResponse:
            await self.registry.unregister(request.node_id, request.lease_id)
            return metadata_pb2.UnregisterNodeResponse()

        return await conv.answer_or_error(
            metadata_pb2.UnregisterNodeResponse, unregister(), raised=conv.UNREACHED
        )

    async def Watch(
        self, request: metadata_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[metadata_pb2.MetadataUpdate]:
        snapshot, sub = self.image.subscribe()
        log.debug("watch opened by %d at version %d", request.node_id, snapshot.version)
        try:
            yield delta_to_proto(snapshot)
            while True:
                yield delta_to_proto(await sub.next())
        finally:
            self.image.unsubscribe(sub)

    # --- writes (controller) --------------------------------------------------------------------

    async def _write(
        self,
        method: str,
        request: Any,
        context: grpc.aio.ServicerContext,
        local: Callable[[], Awaitable[R]],
    ) -> R:
        """`local()` on the controller; elsewhere the request forwarded to the controller."""
        if self.election.is_controller:
            return await local()
        holder = self.image.controller
        if holder is None or was_forwarded(context.invocation_metadata()):
            raise RiverlogError(
                "no controller is known to this instance yet", ErrorCode.NOT_CONTROLLER
            )
        if holder.instance_id == self.election.instance_id:
            raise RiverlogError("this instance was deposed as controller", ErrorCode.NOT_CONTROLLER)
        forwarded: R = await self.peer.forward(holder.address, method, request)
        return forwarded

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreateTopicsResponse:
        async def local() -> admin_pb2.CreateTopicsResponse:
            topics = [conv.new_topic_from_proto(t) for t in request.topics]
            results = await self.topics.create_topics(topics, request.validate_only)
            return admin_pb2.CreateTopicsResponse(topics=conv.topic_results_to_proto(results))

        return await self._write("CreateTopics", request, context, local)

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteTopicsResponse:
        async def local() -> admin_pb2.DeleteTopicsResponse:
            results = await self.topics.delete_topics(list(request.names))
            return admin_pb2.DeleteTopicsResponse(topics=conv.topic_results_to_proto(results))

        return await self._write("DeleteTopics", request, context, local)

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreatePartitionsResponse:
        async def local() -> admin_pb2.CreatePartitionsResponse:
            counts = [(t.name, t.count) for t in request.topics]
            results = await self.topics.create_partitions(counts, request.validate_only)
            return admin_pb2.CreatePartitionsResponse(topics=conv.topic_results_to_proto(results))

        return await self._write("CreatePartitions", request, context, local)

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterConfigsResponse:
        async def local() -> admin_pb2.AlterConfigsResponse:
            changes = [(t.name, conv.config_ops_from_proto(t.ops)) for t in request.topics]
            results = await self.topics.alter_configs(changes, request.validate_only)
            nodes = [(n.name, conv.config_ops_from_proto(n.ops)) for n in request.nodes]
            node_results = await self.node_configs.alter(nodes, request.validate_only)
            return admin_pb2.AlterConfigsResponse(
                topics=conv.topic_results_to_proto(results),
                nodes=conv.topic_results_to_proto(node_results),
            )

        return await self._write("AlterConfigs", request, context, local)

    # --- ACLs: written by the controller, read anywhere (decision 0032) --------------------------

    async def CreateAcls(
        self, request: acls_pb2.CreateAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.CreateAclsResponse:
        return await self._write("CreateAcls", request, context, lambda: self.acls.create(request))

    async def DescribeAcls(
        self, request: acls_pb2.DescribeAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.DescribeAclsResponse:
        return self.acls.describe(request)

    async def DeleteAcls(
        self, request: acls_pb2.DeleteAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.DeleteAclsResponse:
        return await self._write("DeleteAcls", request, context, lambda: self.acls.delete(request))

    # --- leadership and producer ids (controller) -----------------------------------------------

    async def AlterPartition(
        self, request: metadata_pb2.AlterPartitionRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.AlterPartitionResponse:
        async def local() -> metadata_pb2.AlterPartitionResponse:
            items = conv.alter_partition_items_from_proto(request.partitions)
            outcomes = await self.replication.alter_partition(
                request.node_id, request.node_incarnation, items
            )
            return metadata_pb2.AlterPartitionResponse(
                partitions=[conv.alter_partition_outcome_to_proto(o) for o in outcomes]
            )

        write = self._write("AlterPartition", request, context, local)
        return await conv.answer_or_error(metadata_pb2.AlterPartitionResponse, write)

    async def AllocateProducerIds(
        self, request: metadata_pb2.AllocateProducerIdsRequest, context: grpc.aio.ServicerContext
    ) -> metadata_pb2.AllocateProducerIdsResponse:
        async def local() -> metadata_pb2.AllocateProducerIdsResponse:
            block = await self.producer_ids.allocate(request.node_id, request.node_incarnation)
            return metadata_pb2.AllocateProducerIdsResponse(
                producer_id_start=block.start, producer_id_len=block.length
            )

        write = self._write("AllocateProducerIds", request, context, local)
        return await conv.answer_or_error(metadata_pb2.AllocateProducerIdsResponse, write)

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ElectLeadersResponse:
        async def local() -> admin_pb2.ElectLeadersResponse:
            wanted = [(tp.topic, tp.partition) for tp in request.partitions] or None
            preferred = request.election_type == admin_pb2.ELECTION_TYPE_PREFERRED
            results = await self.replication.elect_leaders(preferred, wanted)
            return admin_pb2.ElectLeadersResponse(
                partitions=[conv.election_result_to_proto(r) for r in results]
            )

        if request.election_type not in (
            admin_pb2.ELECTION_TYPE_PREFERRED,
            admin_pb2.ELECTION_TYPE_UNCLEAN,
        ):
            raise RiverlogError(
                f"unknown election type {request.election_type}", ErrorCode.INVALID_REQUEST
            )
        return await self._write("ElectLeaders", request, context, local)

    async def AlterPartitionReassignments(
        self,
        request: admin_pb2.AlterPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        async def local() -> admin_pb2.AlterPartitionReassignmentsResponse:
            return await self.reassignments.alter(request)

        return await self._write("AlterPartitionReassignments", request, context, local)

    async def BalanceReplicas(
        self, request: admin_pb2.BalanceReplicasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.BalanceReplicasResponse:
        async def local() -> admin_pb2.BalanceReplicasResponse:
            return await self.balancer.balance(request)

        return await self._write("BalanceReplicas", request, context, local)

    async def AlterNodeDraining(
        self, request: admin_pb2.AlterNodeDrainingRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterNodeDrainingResponse:
        async def local() -> admin_pb2.AlterNodeDrainingResponse:
            marked = await self.draining.alter(request.node_id, request.draining)
            return admin_pb2.AlterNodeDrainingResponse(draining_nodes=sorted(marked))

        return await self._write("AlterNodeDraining", request, context, local)

    # --- reads (any instance) -------------------------------------------------------------------

    async def ListPartitionReassignments(
        self,
        request: admin_pb2.ListPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        return self.reassignments.list(request)

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeConfigsResponse:
        image = self.image.cluster
        out = admin_pb2.DescribeConfigsResponse()
        for name in request.topics:
            entry = out.topics.add(name=name)
            topic = image.topics.get(name)
            if topic is None:
                entry.error_code = error_code_to_proto(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                entry.error_message = f"This server does not host this topic: {name!r}"
                continue
            entry.configs.extend(conv.config_entries_to_proto(dict(topic.configs)))
        conv.node_configs_to_proto(out, image.node_configs, request.nodes, request.all_nodes)
        return out

    async def ListTopics(
        self, request: admin_pb2.ListTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListTopicsResponse:
        names = sorted(
            name
            for name, topic in self.image.cluster.topics.items()
            if request.include_internal or not (topic.internal or is_internal(name))
        )
        return admin_pb2.ListTopicsResponse(names=names)

    async def DescribeTopics(
        self, request: admin_pb2.DescribeTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeTopicsResponse:
        image = self.image.cluster
        names = list(request.names) or sorted(
            name
            for name, topic in image.topics.items()
            if request.include_internal or not topic.internal
        )
        out = admin_pb2.DescribeTopicsResponse()
        for name in names:
            if name in image.topics:
                out.topics.append(conv.describe_topic_to_proto(image, name, 0, ""))
            else:
                message = f"This server does not host this topic: {name!r}"
                code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                out.topics.append(conv.describe_topic_to_proto(image, name, code, message))
        return out

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClusterResponse:
        return conv.cluster_to_proto(
            self.image.cluster,
            list(self.image.instances.values()),
            self.replication.leader_elections,
            self.replication.isr_changes,
            self.image.draining,
        )
