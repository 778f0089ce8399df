from riverlog.v1 import acls_pb2 as _acls_pb2
from riverlog.v1 import admin_pb2 as _admin_pb2
from riverlog.v1 import common_pb2 as _common_pb2
from riverlog.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterNodeRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.Node
    def __init__(self, node: _Optional[_Union[_common_pb2.Node, _Mapping]] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "lease_id", "lease_ttl_ms", "cluster_id", "heartbeat_interval_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    lease_id: int
    lease_ttl_ms: int
    cluster_id: str
    heartbeat_interval_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., lease_id: _Optional[int] = ..., lease_ttl_ms: _Optional[int] = ..., cluster_id: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ...) -> None: ...

class AllocateIncarnationRequest(_message.Message):
    __slots__ = ("kind", "node_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    kind: _common_pb2.NodeKind
    node_id: int
    def __init__(self, kind: _Optional[_Union[_common_pb2.NodeKind, str]] = ..., node_id: _Optional[int] = ...) -> None: ...

class AllocateIncarnationResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "incarnation")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    incarnation: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., incarnation: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("node_id", "lease_id", "offline_replicas", "replica_sizes")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_SIZES_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    lease_id: int
    offline_replicas: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    replica_sizes: _containers.RepeatedCompositeFieldContainer[ReplicaSize]
    def __init__(self, node_id: _Optional[int] = ..., lease_id: _Optional[int] = ..., offline_replicas: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., replica_sizes: _Optional[_Iterable[_Union[ReplicaSize, _Mapping]]] = ...) -> None: ...

class ReplicaSize(_message.Message):
    __slots__ = ("topic", "partition", "size_bytes")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    size_bytes: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "lease_ttl_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    lease_ttl_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., lease_ttl_ms: _Optional[int] = ...) -> None: ...

class UnregisterNodeRequest(_message.Message):
    __slots__ = ("node_id", "lease_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    lease_id: int
    def __init__(self, node_id: _Optional[int] = ..., lease_id: _Optional[int] = ...) -> None: ...

class UnregisterNodeResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class MetadataUpdate(_message.Message):
    __slots__ = ("version", "controller_id", "controller_epoch", "snapshot", "nodes", "removed_nodes", "topics", "removed_topics", "cluster_id", "coordinator_assignments", "metadata_addresses", "node_configs", "removed_node_configs")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    REMOVED_NODES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    NODE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_NODE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    version: int
    controller_id: int
    controller_epoch: int
    snapshot: bool
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    removed_nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    topics: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicMetadata]
    removed_topics: _containers.RepeatedScalarFieldContainer[str]
    cluster_id: str
    coordinator_assignments: _containers.RepeatedCompositeFieldContainer[CoordinatorAssignment]
    metadata_addresses: _containers.RepeatedScalarFieldContainer[str]
    node_configs: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeConfig]
    removed_node_configs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, version: _Optional[int] = ..., controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., snapshot: _Optional[bool] = ..., nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., removed_nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[_common_pb2.TopicMetadata, _Mapping]]] = ..., removed_topics: _Optional[_Iterable[str]] = ..., cluster_id: _Optional[str] = ..., coordinator_assignments: _Optional[_Iterable[_Union[CoordinatorAssignment, _Mapping]]] = ..., metadata_addresses: _Optional[_Iterable[str]] = ..., node_configs: _Optional[_Iterable[_Union[_common_pb2.NodeConfig, _Mapping]]] = ..., removed_node_configs: _Optional[_Iterable[str]] = ...) -> None: ...

class CoordinatorAssignment(_message.Message):
    __slots__ = ("partition", "coordinator_id", "coordinator_epoch", "coordinator_incarnation")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    partition: int
    coordinator_id: int
    coordinator_epoch: int
    coordinator_incarnation: int
    def __init__(self, partition: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., coordinator_incarnation: _Optional[int] = ...) -> None: ...

class AlterPartitionItem(_message.Message):
    __slots__ = ("topic", "partition", "leader_epoch", "new_isr", "partition_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    leader_epoch: int
    new_isr: _containers.RepeatedScalarFieldContainer[int]
    partition_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("node_id", "node_incarnation", "partitions")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    node_incarnation: int
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionItem]
    def __init__(self, node_id: _Optional[int] = ..., node_incarnation: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionItem, _Mapping]]] = ...) -> None: ...

class AlterPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message", "state")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    state: _common_pb2.PartitionState
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., state: _Optional[_Union[_common_pb2.PartitionState, _Mapping]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("partitions", "error_code", "error_message")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResult]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, partitions: _Optional[_Iterable[_Union[AlterPartitionResult, _Mapping]]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("node_id", "node_incarnation")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    node_incarnation: int
    def __init__(self, node_id: _Optional[int] = ..., node_incarnation: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "producer_id_start", "producer_id_len")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    producer_id_start: int
    producer_id_len: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class WatchClientQuotasRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class StoredUser(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "hash")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    salt: bytes
    hash: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., hash: _Optional[bytes] = ...) -> None: ...

class QuotaConfigEntry(_message.Message):
    __slots__ = ("path", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    path: str
    values: _containers.ScalarMap[str, float]
    def __init__(self, path: _Optional[str] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...

class ClientQuotaImage(_message.Message):
    __slots__ = ("version", "configs", "users", "acls")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    version: int
    configs: _containers.RepeatedCompositeFieldContainer[QuotaConfigEntry]
    users: _containers.RepeatedCompositeFieldContainer[StoredUser]
    acls: _containers.RepeatedCompositeFieldContainer[_acls_pb2.AclBinding]
    def __init__(self, version: _Optional[int] = ..., configs: _Optional[_Iterable[_Union[QuotaConfigEntry, _Mapping]]] = ..., users: _Optional[_Iterable[_Union[StoredUser, _Mapping]]] = ..., acls: _Optional[_Iterable[_Union[_acls_pb2.AclBinding, _Mapping]]] = ...) -> None: ...
