from riverlog.v1 import common_pb2 as _common_pb2
from riverlog.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELECTION_TYPE_PREFERRED: _ClassVar[ElectionType]
    ELECTION_TYPE_UNCLEAN: _ClassVar[ElectionType]
ELECTION_TYPE_PREFERRED: ElectionType
ELECTION_TYPE_UNCLEAN: ElectionType

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class TopicResult(_message.Message):
    __slots__ = ("name", "error_code", "error_message", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    topic_id: str
    def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class Topic(_message.Message):
        __slots__ = ("name", "count")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        name: str
        count: int
        def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("topics", "validate_only", "nodes")
    class Op(_message.Message):
        __slots__ = ("name", "value", "type")
        class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            SET: _ClassVar[AlterConfigsRequest.Op.Type]
            DELETE: _ClassVar[AlterConfigsRequest.Op.Type]
        SET: AlterConfigsRequest.Op.Type
        DELETE: AlterConfigsRequest.Op.Type
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        TYPE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        type: AlterConfigsRequest.Op.Type
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., type: _Optional[_Union[AlterConfigsRequest.Op.Type, str]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "ops")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        name: str
        ops: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Op]
        def __init__(self, name: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[AlterConfigsRequest.Op, _Mapping]]] = ...) -> None: ...
    class Node(_message.Message):
        __slots__ = ("name", "ops")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        name: str
        ops: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Op]
        def __init__(self, name: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[AlterConfigsRequest.Op, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Topic]
    validate_only: bool
    nodes: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Node]
    def __init__(self, topics: _Optional[_Iterable[_Union[AlterConfigsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., nodes: _Optional[_Iterable[_Union[AlterConfigsRequest.Node, _Mapping]]] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms", "nodes")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    throttle_time_ms: int
    nodes: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("topics", "nodes", "all_nodes")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ALL_NODES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    nodes: _containers.RepeatedScalarFieldContainer[str]
    all_nodes: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., nodes: _Optional[_Iterable[str]] = ..., all_nodes: _Optional[bool] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms", "nodes")
    class Topic(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "configs")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        configs: _containers.RepeatedCompositeFieldContainer[_common_pb2.ConfigEntry]
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[_common_pb2.ConfigEntry, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Topic]
    throttle_time_ms: int
    nodes: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeConfigsResponse.Topic, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[DescribeConfigsResponse.Topic, _Mapping]]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ("include_internal",)
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    include_internal: bool
    def __init__(self, include_internal: _Optional[bool] = ...) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("names", "throttle_time_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    throttle_time_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "include_internal")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    include_internal: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., include_internal: _Optional[bool] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    class Topic(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "metadata")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        metadata: _common_pb2.TopicMetadata
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., metadata: _Optional[_Union[_common_pb2.TopicMetadata, _Mapping]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Topic]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeTopicsResponse.Topic, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class MetadataInstance(_message.Message):
    __slots__ = ("instance_id", "host", "port", "is_controller")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    IS_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    instance_id: int
    host: str
    port: int
    is_controller: bool
    def __init__(self, instance_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., is_controller: _Optional[bool] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("cluster_id", "controller_id", "controller_epoch", "metadata_instances", "nodes", "metadata_version", "offline_partitions", "under_replicated_partitions", "leader_elections", "isr_changes", "throttle_time_ms", "draining_nodes")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    UNDER_REPLICATED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ELECTIONS_FIELD_NUMBER: _ClassVar[int]
    ISR_CHANGES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_NODES_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    controller_id: int
    controller_epoch: int
    metadata_instances: _containers.RepeatedCompositeFieldContainer[MetadataInstance]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    metadata_version: int
    offline_partitions: int
    under_replicated_partitions: int
    leader_elections: int
    isr_changes: int
    throttle_time_ms: int
    draining_nodes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., metadata_instances: _Optional[_Iterable[_Union[MetadataInstance, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., metadata_version: _Optional[int] = ..., offline_partitions: _Optional[int] = ..., under_replicated_partitions: _Optional[int] = ..., leader_elections: _Optional[int] = ..., isr_changes: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ..., draining_nodes: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "partitions")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class ElectLeadersResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message", "leader", "leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    leader: int
    leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[ElectLeadersResult]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ElectLeadersResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ReassignablePartition(_message.Message):
    __slots__ = ("topic", "partition", "replicas", "cancel")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    cancel: bool
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[ReassignablePartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[ReassignablePartition, _Mapping]]] = ...) -> None: ...

class ReassignablePartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[ReassignablePartitionResult]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ReassignablePartitionResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class OngoingPartitionReassignment(_message.Message):
    __slots__ = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas", "isr", "leader", "replica_progress")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICA_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    replica_progress: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., replica_progress: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("node_id", "log_end_offset", "size_bytes")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    log_end_offset: int
    size_bytes: int
    def __init__(self, node_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[OngoingPartitionReassignment]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OngoingPartitionReassignment, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DescribableLogDirTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeClusterLogDirsRequest(_message.Message):
    __slots__ = ("topics", "node_ids")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribableLogDirTopic]
    node_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribableLogDirTopic, _Mapping]]] = ..., node_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class LogDirPartition(_message.Message):
    __slots__ = ("partition", "size_bytes", "offset_lag", "is_future", "remote_size_bytes", "log_start_offset", "local_log_start_offset", "log_end_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_LAG_FIELD_NUMBER: _ClassVar[int]
    IS_FUTURE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOCAL_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool
    remote_size_bytes: int
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    def __init__(self, partition: _Optional[int] = ..., size_bytes: _Optional[int] = ..., offset_lag: _Optional[int] = ..., is_future: _Optional[bool] = ..., remote_size_bytes: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., local_log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class LogDirTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedCompositeFieldContainer[LogDirPartition]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[LogDirPartition, _Mapping]]] = ...) -> None: ...

class LogDirDescription(_message.Message):
    __slots__ = ("log_dir", "error_code", "error_message", "topics")
    LOG_DIR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    log_dir: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[LogDirTopic]
    def __init__(self, log_dir: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[LogDirTopic, _Mapping]]] = ...) -> None: ...

class NodeLogDirs(_message.Message):
    __slots__ = ("node_id", "error_code", "error_message", "log_dirs")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    log_dirs: _containers.RepeatedCompositeFieldContainer[LogDirDescription]
    def __init__(self, node_id: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., log_dirs: _Optional[_Iterable[_Union[LogDirDescription, _Mapping]]] = ...) -> None: ...

class LogDirsError(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DescribeClusterLogDirsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "nodes", "errors", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeLogDirs]
    errors: _containers.RepeatedCompositeFieldContainer[LogDirsError]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[NodeLogDirs, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[LogDirsError, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class BalanceReplicasRequest(_message.Message):
    __slots__ = ("dry_run",)
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    def __init__(self, dry_run: _Optional[bool] = ...) -> None: ...

class BalanceMove(_message.Message):
    __slots__ = ("topic", "partition", "current", "target", "bytes_to_copy")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    BYTES_TO_COPY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    current: _containers.RepeatedScalarFieldContainer[int]
    target: _containers.RepeatedScalarFieldContainer[int]
    bytes_to_copy: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., current: _Optional[_Iterable[int]] = ..., target: _Optional[_Iterable[int]] = ..., bytes_to_copy: _Optional[int] = ...) -> None: ...

class NodeBalance(_message.Message):
    __slots__ = ("node_id", "rack", "replicas_before", "replicas_after", "leaders_before", "leaders_after", "bytes_before", "bytes_after")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_AFTER_FIELD_NUMBER: _ClassVar[int]
    LEADERS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    LEADERS_AFTER_FIELD_NUMBER: _ClassVar[int]
    BYTES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    BYTES_AFTER_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    rack: str
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int
    bytes_before: int
    bytes_after: int
    def __init__(self, node_id: _Optional[int] = ..., rack: _Optional[str] = ..., replicas_before: _Optional[int] = ..., replicas_after: _Optional[int] = ..., leaders_before: _Optional[int] = ..., leaders_after: _Optional[int] = ..., bytes_before: _Optional[int] = ..., bytes_after: _Optional[int] = ...) -> None: ...

class BalanceReplicasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "moves", "nodes", "moves_in_progress", "running", "enabled", "max_concurrent_moves", "rack_violations_before", "rack_violations_after", "notes", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    MOVES_IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_MOVES_FIELD_NUMBER: _ClassVar[int]
    RACK_VIOLATIONS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    RACK_VIOLATIONS_AFTER_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    moves: _containers.RepeatedCompositeFieldContainer[BalanceMove]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeBalance]
    moves_in_progress: int
    running: bool
    enabled: bool
    max_concurrent_moves: int
    rack_violations_before: int
    rack_violations_after: int
    notes: _containers.RepeatedScalarFieldContainer[str]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., moves: _Optional[_Iterable[_Union[BalanceMove, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeBalance, _Mapping]]] = ..., moves_in_progress: _Optional[int] = ..., running: _Optional[bool] = ..., enabled: _Optional[bool] = ..., max_concurrent_moves: _Optional[int] = ..., rack_violations_before: _Optional[int] = ..., rack_violations_after: _Optional[int] = ..., notes: _Optional[_Iterable[str]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class AlterNodeDrainingRequest(_message.Message):
    __slots__ = ("node_id", "draining")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    draining: bool
    def __init__(self, node_id: _Optional[int] = ..., draining: _Optional[bool] = ...) -> None: ...

class AlterNodeDrainingResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "draining_nodes", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DRAINING_NODES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    draining_nodes: _containers.RepeatedScalarFieldContainer[int]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., draining_nodes: _Optional[_Iterable[int]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ClientQuotaEntityComponent(_message.Message):
    __slots__ = ("entity_type", "name")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    name: str
    def __init__(self, entity_type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ClientQuotaEntity(_message.Message):
    __slots__ = ("components",)
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[ClientQuotaEntityComponent]
    def __init__(self, components: _Optional[_Iterable[_Union[ClientQuotaEntityComponent, _Mapping]]] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only")
    class Op(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: ClientQuotaEntity
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Op]
        def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Op, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Entry]
    validate_only: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Entry, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("results", "throttle_time_ms")
    class Result(_message.Message):
        __slots__ = ("entity", "error_code", "error_message")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        entity: ClientQuotaEntity
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasResponse.Result]
    throttle_time_ms: int
    def __init__(self, results: _Optional[_Iterable[_Union[AlterClientQuotasResponse.Result, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("components", "strict")
    class MatchType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        MATCH_EXACT: _ClassVar[DescribeClientQuotasRequest.MatchType]
        MATCH_DEFAULT: _ClassVar[DescribeClientQuotasRequest.MatchType]
        MATCH_SPECIFIED: _ClassVar[DescribeClientQuotasRequest.MatchType]
    MATCH_EXACT: DescribeClientQuotasRequest.MatchType
    MATCH_DEFAULT: DescribeClientQuotasRequest.MatchType
    MATCH_SPECIFIED: DescribeClientQuotasRequest.MatchType
    class Component(_message.Message):
        __slots__ = ("entity_type", "match_type", "match")
        ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_FIELD_NUMBER: _ClassVar[int]
        entity_type: str
        match_type: DescribeClientQuotasRequest.MatchType
        match: str
        def __init__(self, entity_type: _Optional[str] = ..., match_type: _Optional[_Union[DescribeClientQuotasRequest.MatchType, str]] = ..., match: _Optional[str] = ...) -> None: ...
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasRequest.Component]
    strict: bool
    def __init__(self, components: _Optional[_Iterable[_Union[DescribeClientQuotasRequest.Component, _Mapping]]] = ..., strict: _Optional[bool] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "entries", "throttle_time_ms")
    class Entry(_message.Message):
        __slots__ = ("entity", "values")
        class ValuesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: float
            def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: ClientQuotaEntity
        values: _containers.ScalarMap[str, float]
        def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.Entry]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.Entry, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class UpsertUserRequest(_message.Message):
    __slots__ = ("name", "password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    password: str
    def __init__(self, name: _Optional[str] = ..., password: _Optional[str] = ...) -> None: ...

class UpsertUserResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UserDescription(_message.Message):
    __slots__ = ("name", "mechanism", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users", "throttle_time_ms")
    USERS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[UserDescription]
    throttle_time_ms: int
    def __init__(self, users: _Optional[_Iterable[_Union[UserDescription, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...
