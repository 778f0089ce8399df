from riverlog.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_KIND_UNSPECIFIED: _ClassVar[NodeKind]
    NODE_KIND_STORAGE: _ClassVar[NodeKind]
    NODE_KIND_GATEWAY: _ClassVar[NodeKind]
    NODE_KIND_COORDINATOR: _ClassVar[NodeKind]
    NODE_KIND_QUOTA: _ClassVar[NodeKind]
    NODE_KIND_METADATA: _ClassVar[NodeKind]

class Acks(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACKS_LEADER: _ClassVar[Acks]
    ACKS_NONE: _ClassVar[Acks]
    ACKS_ALL: _ClassVar[Acks]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    READ_COMMITTED: _ClassVar[IsolationLevel]

class OffsetSpec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OFFSET_SPEC_TIMESTAMP: _ClassVar[OffsetSpec]
    OFFSET_SPEC_LATEST: _ClassVar[OffsetSpec]
    OFFSET_SPEC_EARLIEST: _ClassVar[OffsetSpec]
    OFFSET_SPEC_MAX_TIMESTAMP: _ClassVar[OffsetSpec]
    OFFSET_SPEC_EARLIEST_LOCAL: _ClassVar[OffsetSpec]
NODE_KIND_UNSPECIFIED: NodeKind
NODE_KIND_STORAGE: NodeKind
NODE_KIND_GATEWAY: NodeKind
NODE_KIND_COORDINATOR: NodeKind
NODE_KIND_QUOTA: NodeKind
NODE_KIND_METADATA: NodeKind
ACKS_LEADER: Acks
ACKS_NONE: Acks
ACKS_ALL: Acks
READ_UNCOMMITTED: IsolationLevel
READ_COMMITTED: IsolationLevel
OFFSET_SPEC_TIMESTAMP: OffsetSpec
OFFSET_SPEC_LATEST: OffsetSpec
OFFSET_SPEC_EARLIEST: OffsetSpec
OFFSET_SPEC_MAX_TIMESTAMP: OffsetSpec
OFFSET_SPEC_EARLIEST_LOCAL: OffsetSpec

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: _errors_pb2.ErrorCode
    message: str
    def __init__(self, code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., message: _Optional[str] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("node_id", "kind", "host", "port", "rack", "zero_copy_port", "incarnation", "offline_replicas", "direct_port")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    ZERO_COPY_PORT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DIRECT_PORT_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    kind: NodeKind
    host: str
    port: int
    rack: str
    zero_copy_port: int
    incarnation: int
    offline_replicas: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    direct_port: int
    def __init__(self, node_id: _Optional[int] = ..., kind: _Optional[_Union[NodeKind, str]] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., zero_copy_port: _Optional[int] = ..., incarnation: _Optional[int] = ..., offline_replicas: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ..., direct_port: _Optional[int] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., is_default: _Optional[bool] = ...) -> None: ...

class NodeConfig(_message.Message):
    __slots__ = ("name", "configs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ("partition", "leader", "leader_epoch", "replicas", "isr", "partition_epoch", "adding_replicas", "removing_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    leader_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    partition_epoch: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("name", "topic_id", "partitions", "configs", "internal")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    internal: bool
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ..., internal: _Optional[bool] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("key", "has_key", "value", "has_value", "headers", "timestamp_ms", "offset", "timestamp_type")
    KEY_FIELD_NUMBER: _ClassVar[int]
    HAS_KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HAS_VALUE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_TYPE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    has_key: bool
    value: bytes
    has_value: bool
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    timestamp_ms: int
    offset: int
    timestamp_type: int
    def __init__(self, key: _Optional[bytes] = ..., has_key: _Optional[bool] = ..., value: _Optional[bytes] = ..., has_value: _Optional[bool] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., timestamp_ms: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_type: _Optional[int] = ...) -> None: ...
