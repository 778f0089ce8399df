"""Local clusters: etcd, metadata instances, storage nodes and gateways as real processes on
loopback, for tests, benchmarks and `riverlog cluster up`.

Imports only `riverlog.common` and `riverlog.v1`; services are started by module name.
"""

from .errors import ClusterError, ClusterNotFoundError, ProcessStartError
from .etcd import etcd_binary
from .local import LocalCluster
from .process import ManagedProcess, ProcessSpec
from .readiness import ClusterView, free_port
from .state import STATE_FILE
from .topics import create_topic, unique_topic_name, wait_for_topic

__all__ = [
    "STATE_FILE",
    "ClusterError",
    "ClusterNotFoundError",
    "ClusterView",
    "LocalCluster",
    "ManagedProcess",
    "ProcessSpec",
    "ProcessStartError",
    "create_topic",
    "etcd_binary",
    "free_port",
    "unique_topic_name",
    "wait_for_topic",
]
