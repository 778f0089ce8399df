from riverlog.v1 import data_pb2 as _data_pb2
from riverlog.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffsetForLeaderPartition(_message.Message):
    __slots__ = ("topic", "partition", "current_leader_epoch", "leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "partitions")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderPartition]
    def __init__(self, replica_id: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderPartition, _Mapping]]] = ...) -> None: ...

class OffsetForLeaderEpochResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message", "leader_epoch", "end_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    leader_epoch: int
    end_offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochResult]
    def __init__(self, partitions: _Optional[_Iterable[_Union[OffsetForLeaderEpochResult, _Mapping]]] = ...) -> None: ...

class DescribeLogDirsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeLogDirsResponse(_message.Message):
    __slots__ = ("node_id", "log_dirs", "isr_shrinks", "isr_expands", "under_replicated_partitions")
    class PartitionInfo(_message.Message):
        __slots__ = ("topic", "partition", "size_bytes", "log_start_offset", "log_end_offset", "high_watermark", "segment_count", "remote_size_bytes", "local_log_start_offset", "is_future", "offset_lag")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
        REMOTE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
        LOCAL_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        IS_FUTURE_FIELD_NUMBER: _ClassVar[int]
        OFFSET_LAG_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        size_bytes: int
        log_start_offset: int
        log_end_offset: int
        high_watermark: int
        segment_count: int
        remote_size_bytes: int
        local_log_start_offset: int
        is_future: bool
        offset_lag: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., size_bytes: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., segment_count: _Optional[int] = ..., remote_size_bytes: _Optional[int] = ..., local_log_start_offset: _Optional[int] = ..., is_future: _Optional[bool] = ..., offset_lag: _Optional[int] = ...) -> None: ...
    class LogDir(_message.Message):
        __slots__ = ("path", "error_code", "partitions", "total_bytes", "error_message")
        PATH_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        path: str
        error_code: _errors_pb2.ErrorCode
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.PartitionInfo]
        total_bytes: int
        error_message: str
        def __init__(self, path: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., partitions: _Optional[_Iterable[_Union[DescribeLogDirsResponse.PartitionInfo, _Mapping]]] = ..., total_bytes: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    ISR_SHRINKS_FIELD_NUMBER: _ClassVar[int]
    ISR_EXPANDS_FIELD_NUMBER: _ClassVar[int]
    UNDER_REPLICATED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    log_dirs: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.LogDir]
    isr_shrinks: int
    isr_expands: int
    under_replicated_partitions: int
    def __init__(self, node_id: _Optional[int] = ..., log_dirs: _Optional[_Iterable[_Union[DescribeLogDirsResponse.LogDir, _Mapping]]] = ..., isr_shrinks: _Optional[int] = ..., isr_expands: _Optional[int] = ..., under_replicated_partitions: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "committed", "coordinator_epoch", "topic", "partition", "timeout_ms")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    topic: str
    partition: int
    timeout_ms: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    offset: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...
