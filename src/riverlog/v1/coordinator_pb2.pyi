from riverlog.v1 import errors_pb2 as _errors_pb2
from riverlog.v1 import transactions_pb2 as _transactions_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CoordinatorKeyType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COORDINATOR_KEY_TYPE_GROUP: _ClassVar[CoordinatorKeyType]
    COORDINATOR_KEY_TYPE_TRANSACTION: _ClassVar[CoordinatorKeyType]
COORDINATOR_KEY_TYPE_GROUP: CoordinatorKeyType
COORDINATOR_KEY_TYPE_TRANSACTION: CoordinatorKeyType

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("key_type", "keys")
    KEY_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    key_type: CoordinatorKeyType
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_type: _Optional[_Union[CoordinatorKeyType, str]] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class FoundCoordinator(_message.Message):
    __slots__ = ("key", "node_id", "host", "port", "partition", "error_code", "error_message")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    key: str
    node_id: int
    host: str
    port: int
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, key: _Optional[str] = ..., node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("coordinators", "throttle_time_ms", "error_code", "error_message")
    COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    coordinators: _containers.RepeatedCompositeFieldContainer[FoundCoordinator]
    throttle_time_ms: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, coordinators: _Optional[_Iterable[_Union[FoundCoordinator, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class JoinGroupProtocol(_message.Message):
    __slots__ = ("name", "metadata")
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    metadata: bytes
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "group_instance_id", "protocol_type", "protocols", "reason", "client_id", "client_host")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocols: _containers.RepeatedCompositeFieldContainer[JoinGroupProtocol]
    reason: str
    client_id: str
    client_host: str
    def __init__(self, group_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[JoinGroupProtocol, _Mapping]]] = ..., reason: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ...) -> None: ...

class JoinGroupResponseMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "metadata")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    metadata: bytes
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "generation_id", "protocol_type", "protocol_name", "leader", "skip_assignment", "member_id", "members")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    SKIP_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader: str
    skip_assignment: bool
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupResponseMember]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., generation_id: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., leader: _Optional[str] = ..., skip_assignment: _Optional[bool] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupResponseMember, _Mapping]]] = ...) -> None: ...

class SyncGroupAssignment(_message.Message):
    __slots__ = ("member_id", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "protocol_type", "protocol_name", "assignments")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocol_name: str
    assignments: _containers.RepeatedCompositeFieldContainer[SyncGroupAssignment]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignments: _Optional[_Iterable[_Union[SyncGroupAssignment, _Mapping]]] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "protocol_type", "protocol_name", "assignment")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    protocol_type: str
    protocol_name: str
    assignment: bytes
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class GroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class GroupHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class LeavingMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "reason")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    reason: str
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LeavingMemberResponse(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "error_code", "error_message")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "members")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    members: _containers.RepeatedCompositeFieldContainer[LeavingMember]
    def __init__(self, group_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[LeavingMember, _Mapping]]] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "members")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    members: _containers.RepeatedCompositeFieldContainer[LeavingMemberResponse]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., members: _Optional[_Iterable[_Union[LeavingMemberResponse, _Mapping]]] = ...) -> None: ...

class OffsetCommitPartition(_message.Message):
    __slots__ = ("partition", "committed_offset", "committed_leader_epoch", "metadata")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    partition: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    def __init__(self, partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class OffsetCommitTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartition, _Mapping]]] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "topics")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitTopic]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitTopic, _Mapping]]] = ...) -> None: ...

class OffsetCommitPartitionResponse(_message.Message):
    __slots__ = ("partition", "error_code", "error_message")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class OffsetCommitTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartitionResponse, _Mapping]]] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitTopicResponse]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitTopicResponse, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "group_instance_id", "topics")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., group_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitTopic, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitTopicResponse]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitTopicResponse, _Mapping]]] = ...) -> None: ...

class OffsetFetchTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "topics", "all_topics", "require_stable")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchTopic]
    all_topics: bool
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchTopic, _Mapping]]] = ..., all_topics: _Optional[bool] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class OffsetFetchPartitionResponse(_message.Message):
    __slots__ = ("partition", "committed_offset", "committed_leader_epoch", "metadata", "error_code", "error_message")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class OffsetFetchTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetFetchPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetFetchPartitionResponse, _Mapping]]] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchTopicResponse]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchTopicResponse, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("states_filter",)
    STATES_FILTER_FIELD_NUMBER: _ClassVar[int]
    states_filter: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, states_filter: _Optional[_Iterable[str]] = ...) -> None: ...

class ListedGroup(_message.Message):
    __slots__ = ("group_id", "protocol_type", "group_state")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    protocol_type: str
    group_state: str
    def __init__(self, group_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., group_state: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "groups")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    groups: _containers.RepeatedCompositeFieldContainer[ListedGroup]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[ListedGroup, _Mapping]]] = ...) -> None: ...

class DescribeGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedGroupMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "member_metadata", "member_assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_metadata: _Optional[bytes] = ..., member_assignment: _Optional[bytes] = ...) -> None: ...

class DescribedGroup(_message.Message):
    __slots__ = ("error_code", "error_message", "group_id", "group_state", "protocol_type", "protocol_data", "members", "generation_id", "leader")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_DATA_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: _containers.RepeatedCompositeFieldContainer[DescribedGroupMember]
    generation_id: int
    leader: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_data: _Optional[str] = ..., members: _Optional[_Iterable[_Union[DescribedGroupMember, _Mapping]]] = ..., generation_id: _Optional[int] = ..., leader: _Optional[str] = ...) -> None: ...

class DescribeGroupsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "groups")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    groups: _containers.RepeatedCompositeFieldContainer[DescribedGroup]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[DescribedGroup, _Mapping]]] = ...) -> None: ...

class DeleteGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DeletableGroupResult(_message.Message):
    __slots__ = ("group_id", "error_code", "error_message")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DeleteGroupsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    results: _containers.RepeatedCompositeFieldContainer[DeletableGroupResult]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DeletableGroupResult, _Mapping]]] = ...) -> None: ...

class AbortTransactionRequest(_message.Message):
    __slots__ = ("transactional_id",)
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    def __init__(self, transactional_id: _Optional[str] = ...) -> None: ...

class AbortTransactionResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "throttle_time_ms", "previous_state", "producer_id", "producer_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    throttle_time_ms: int
    previous_state: str
    producer_id: int
    producer_epoch: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., throttle_time_ms: _Optional[int] = ..., previous_state: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class WriteOffsetsTxnMarkerRequest(_message.Message):
    __slots__ = ("partition", "producer_id", "producer_epoch", "committed", "coordinator_epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    def __init__(self, partition: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class WriteOffsetsTxnMarkerResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
