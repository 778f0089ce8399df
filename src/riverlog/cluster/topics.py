"""Topic set-up for tests and benchmarks that run against a local cluster, through the
gateway's plain gRPC API (no SDK): create a topic and wait until every partition has a leader
in the gateway's metadata, and make topic names that never collide within a run.

These are harness helpers: applications use `riverlog.client.AdminClient`.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Mapping

import grpc

from riverlog.common.errors import ErrorCode, raise_for
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import admin_pb2, common_pb2, gateway_pb2, gateway_pb2_grpc

from .errors import ClusterError
from .readiness import LAUNCHER_CLIENT_ID

_counter = itertools.count(1)
_INVALID = re.compile(r"[^a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249


def unique_topic_name(prefix: str = "topic") -> str:
    """`<prefix>-<pid>-<n>-<ns clock>`: unique per process run, valid as a Kafka topic name
    (letters, digits, `.`, `_`, `-`; at most 249 characters)."""
    clean = _INVALID.sub("-", prefix).strip("-") or "topic"
    suffix = f"-{os.getpid()}-{next(_counter)}-{time.monotonic_ns() % 1_000_000_000}"
    return clean[: MAX_TOPIC_NAME - len(suffix)] + suffix


def _metadata() -> tuple[tuple[str, str], ...]:
    return ((CLIENT_ID_KEY, LAUNCHER_CLIENT_ID),)


def create_topic(
    gateway_address: str,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    credentials: grpc.ChannelCredentials | None = None,
) -> common_pb2.TopicMetadata:
    """Create `name` (TLS with `credentials`) and wait until the gateway knows a leader for
    every partition.

    Raises RiverlogError with the cluster's code (TOPIC_ALREADY_EXISTS, INVALID_CONFIG, ...)
    when the creation is refused, ClusterError when the leaders do not appear in time."""
    request = admin_pb2.CreateTopicsRequest(
        topics=[
            admin_pb2.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=dict(configs or {}),
            )
        ]
    )
    with sync_channel(gateway_address, credentials) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        try:
            response = stub.CreateTopics(request, timeout=timeout, metadata=_metadata())
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        for result in response.topics:
            raise_for(result.error_code, result.error_message)
        return _wait_for_leaders(stub, name, partitions, timeout)


def wait_for_topic(
    gateway_address: str, name: str, partitions: int, timeout: float = 30.0
) -> common_pb2.TopicMetadata:
    """Wait until the gateway reports `partitions` partitions of `name`, each with a leader."""
    with sync_channel(gateway_address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        return _wait_for_leaders(stub, name, partitions, timeout)


def _wait_for_leaders(
    stub: gateway_pb2_grpc.GatewayStub, name: str, partitions: int, timeout: float
) -> common_pb2.TopicMetadata:
    deadline = time.monotonic() + timeout
    seen = "no metadata yet"
    while True:
        try:
            response: gateway_pb2.GetMetadataResponse = stub.GetMetadata(
                gateway_pb2.GetMetadataRequest(topics=[name]),
                timeout=max(0.5, min(5.0, deadline - time.monotonic())),
                metadata=_metadata(),
            )
        except grpc.RpcError as e:
            seen = str(from_rpc_error(e))
        else:
            topic: common_pb2.TopicMetadata
            for topic in response.topics:
                if topic.name != name:
                    continue
                leaders = [p.leader for p in topic.partitions]
                if len(leaders) >= partitions > 0 and all(leader >= 0 for leader in leaders):
                    return topic
                seen = f"leaders {leaders}"
            if any(int(e.error_code) != ErrorCode.NONE for e in response.errors):
                seen = f"unknown topic {name!r}"
        if time.monotonic() >= deadline:
            raise ClusterError(f"topic {name!r} has no leader for every partition: {seen}")
        time.sleep(0.05)
