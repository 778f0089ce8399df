from riverlog.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QuotaMetricEntity(_message.Message):
    __slots__ = ("user", "client_id")
    USER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    user: str
    client_id: str
    def __init__(self, user: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class QuotaUsageDelta(_message.Message):
    __slots__ = ("quota_type", "entity", "value")
    QUOTA_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    quota_type: str
    entity: QuotaMetricEntity
    value: float
    def __init__(self, quota_type: _Optional[str] = ..., entity: _Optional[_Union[QuotaMetricEntity, _Mapping]] = ..., value: _Optional[float] = ...) -> None: ...

class ReportUsageRequest(_message.Message):
    __slots__ = ("gateway_id", "seq", "deltas", "interval_ms")
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    gateway_id: str
    seq: int
    deltas: _containers.RepeatedCompositeFieldContainer[QuotaUsageDelta]
    interval_ms: int
    def __init__(self, gateway_id: _Optional[str] = ..., seq: _Optional[int] = ..., deltas: _Optional[_Iterable[_Union[QuotaUsageDelta, _Mapping]]] = ..., interval_ms: _Optional[int] = ...) -> None: ...

class QuotaHold(_message.Message):
    __slots__ = ("quota_type", "entity", "remaining_ms")
    QUOTA_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    quota_type: str
    entity: QuotaMetricEntity
    remaining_ms: int
    def __init__(self, quota_type: _Optional[str] = ..., entity: _Optional[_Union[QuotaMetricEntity, _Mapping]] = ..., remaining_ms: _Optional[int] = ...) -> None: ...

class QuotaAllowance(_message.Message):
    __slots__ = ("quota_type", "entity", "value")
    QUOTA_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    quota_type: str
    entity: QuotaMetricEntity
    value: float
    def __init__(self, quota_type: _Optional[str] = ..., entity: _Optional[_Union[QuotaMetricEntity, _Mapping]] = ..., value: _Optional[float] = ...) -> None: ...

class ReportUsageResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "holds", "allowances")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    ALLOWANCES_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    holds: _containers.RepeatedCompositeFieldContainer[QuotaHold]
    allowances: _containers.RepeatedCompositeFieldContainer[QuotaAllowance]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., holds: _Optional[_Iterable[_Union[QuotaHold, _Mapping]]] = ..., allowances: _Optional[_Iterable[_Union[QuotaAllowance, _Mapping]]] = ...) -> None: ...

class QuotaWindowSample(_message.Message):
    __slots__ = ("start_age_ms", "last_event_age_ms", "value", "event_count")
    START_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    start_age_ms: int
    last_event_age_ms: int
    value: float
    event_count: int
    def __init__(self, start_age_ms: _Optional[int] = ..., last_event_age_ms: _Optional[int] = ..., value: _Optional[float] = ..., event_count: _Optional[int] = ...) -> None: ...

class QuotaEntityWindow(_message.Message):
    __slots__ = ("quota_type", "entity", "samples", "throttle_remaining_ms")
    QUOTA_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    quota_type: str
    entity: QuotaMetricEntity
    samples: _containers.RepeatedCompositeFieldContainer[QuotaWindowSample]
    throttle_remaining_ms: int
    def __init__(self, quota_type: _Optional[str] = ..., entity: _Optional[_Union[QuotaMetricEntity, _Mapping]] = ..., samples: _Optional[_Iterable[_Union[QuotaWindowSample, _Mapping]]] = ..., throttle_remaining_ms: _Optional[int] = ...) -> None: ...

class HandOverWindowsRequest(_message.Message):
    __slots__ = ("from_node_id", "leaving", "windows", "from_incarnation")
    FROM_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    FROM_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    from_node_id: int
    leaving: bool
    windows: _containers.RepeatedCompositeFieldContainer[QuotaEntityWindow]
    from_incarnation: int
    def __init__(self, from_node_id: _Optional[int] = ..., leaving: _Optional[bool] = ..., windows: _Optional[_Iterable[_Union[QuotaEntityWindow, _Mapping]]] = ..., from_incarnation: _Optional[int] = ...) -> None: ...

class HandOverWindowsResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
