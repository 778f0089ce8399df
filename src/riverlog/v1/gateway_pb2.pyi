from riverlog.v1 import acls_pb2 as _acls_pb2
from riverlog.v1 import admin_pb2 as _admin_pb2
from riverlog.v1 import common_pb2 as _common_pb2
from riverlog.v1 import coordinator_pb2 as _coordinator_pb2
from riverlog.v1 import data_pb2 as _data_pb2
from riverlog.v1 import errors_pb2 as _errors_pb2
from riverlog.v1 import transactions_pb2 as _transactions_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataAccessOperation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_ACCESS_OPERATION_UNSPECIFIED: _ClassVar[DataAccessOperation]
    DATA_ACCESS_READ: _ClassVar[DataAccessOperation]
    DATA_ACCESS_WRITE: _ClassVar[DataAccessOperation]
DATA_ACCESS_OPERATION_UNSPECIFIED: DataAccessOperation
DATA_ACCESS_READ: DataAccessOperation
DATA_ACCESS_WRITE: DataAccessOperation

class ProduceRecordsRequest(_message.Message):
    __slots__ = ("topic", "partition", "records", "acks", "timeout_ms", "compression_type")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    acks: _common_pb2.Acks
    timeout_ms: int
    compression_type: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., acks: _Optional[_Union[_common_pb2.Acks, str]] = ..., timeout_ms: _Optional[int] = ..., compression_type: _Optional[str] = ...) -> None: ...

class RecordResult(_message.Message):
    __slots__ = ("partition", "offset", "error_code", "error_message")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    offset: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, partition: _Optional[int] = ..., offset: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class ProduceRecordsResponse(_message.Message):
    __slots__ = ("results", "throttle_time_ms")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RecordResult]
    throttle_time_ms: int
    def __init__(self, results: _Optional[_Iterable[_Union[RecordResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class FetchRecordsRequest(_message.Message):
    __slots__ = ("topic", "partition", "offset", "max_records", "max_bytes", "max_wait_ms", "isolation_level", "rack_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    max_records: int
    max_bytes: int
    max_wait_ms: int
    isolation_level: _common_pb2.IsolationLevel
    rack_id: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., max_records: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., isolation_level: _Optional[_Union[_common_pb2.IsolationLevel, str]] = ..., rack_id: _Optional[str] = ...) -> None: ...

class FetchRecordsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "records", "high_watermark", "log_start_offset", "next_offset", "throttle_time_ms", "last_stable_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    high_watermark: int
    log_start_offset: int
    next_offset: int
    throttle_time_ms: int
    last_stable_offset: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ..., last_stable_offset: _Optional[int] = ...) -> None: ...

class GetMetadataRequest(_message.Message):
    __slots__ = ("topics", "include_internal")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    include_internal: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., include_internal: _Optional[bool] = ...) -> None: ...

class GetMetadataResponse(_message.Message):
    __slots__ = ("cluster_id", "controller_id", "topics", "nodes", "errors", "metadata_version", "throttle_time_ms")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicMetadata]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    errors: _containers.RepeatedCompositeFieldContainer[_admin_pb2.TopicResult]
    metadata_version: int
    throttle_time_ms: int
    def __init__(self, cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[_common_pb2.TopicMetadata, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[_admin_pb2.TopicResult, _Mapping]]] = ..., metadata_version: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class GrantDataAccessRequest(_message.Message):
    __slots__ = ("operation", "topics", "node_id")
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    operation: DataAccessOperation
    topics: _containers.RepeatedScalarFieldContainer[str]
    node_id: int
    def __init__(self, operation: _Optional[_Union[DataAccessOperation, str]] = ..., topics: _Optional[_Iterable[str]] = ..., node_id: _Optional[int] = ...) -> None: ...

class GrantDataAccessResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "grant", "expires_at_ms", "byte_budget", "throttle_time_ms", "host", "direct_port", "lifetime_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    BYTE_BUDGET_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    DIRECT_PORT_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    grant: bytes
    expires_at_ms: int
    byte_budget: int
    throttle_time_ms: int
    host: str
    direct_port: int
    lifetime_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., grant: _Optional[bytes] = ..., expires_at_ms: _Optional[int] = ..., byte_budget: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ..., host: _Optional[str] = ..., direct_port: _Optional[int] = ..., lifetime_ms: _Optional[int] = ...) -> None: ...
