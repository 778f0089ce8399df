"""Following and joining the cluster from any process: the cluster image and its Watch deltas,
a failover client of the metadata service, membership (register + heartbeat) and a watcher."""

from .client import MetadataClient, parse_addresses
from .image import (
    ClusterDelta,
    ClusterImage,
    CoordinatorAssignment,
    NodeInfo,
    PartitionInfo,
    TopicInfo,
)
from .incarnation import allocate_incarnation
from .membership import MembershipSession, Registration
from .watcher import MetadataWatcher

__all__ = [
    "ClusterDelta",
    "ClusterImage",
    "CoordinatorAssignment",
    "MembershipSession",
    "MetadataClient",
    "MetadataWatcher",
    "NodeInfo",
    "PartitionInfo",
    "Registration",
    "TopicInfo",
    "allocate_incarnation",
    "parse_addresses",
]
