"""One error catalog for every service: code → (gRPC status, retriable, refresh metadata, message).

Codes come from `proto/riverlog/v1/errors.proto` (Kafka's numbers where Kafka has the code).
`ErrorCode` mirrors that enum so code reads typed; a unit test keeps the two identical.
Exceptions are rebuilt on the client from the code alone (`error_for`), so internal exceptions
never cross the wire.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

import grpc


class ErrorCode(enum.IntEnum):
    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_EXPIRED = 66
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    INELIGIBLE_REPLICA = 107
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    TRANSACTION_ABORTABLE = 120
    UNKNOWN_NODE = 1000
    NODE_ID_IN_USE = 1001
    INVALID_OFFSET = 1002


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    status: grpc.StatusCode
    retriable: bool
    refresh_metadata: bool
    message: str


def _spec(status: str, retriable: bool, refresh: bool, message: str) -> ErrorSpec:
    return ErrorSpec(grpc.StatusCode[status], retriable, refresh, message)


ERRORS: Final[dict[ErrorCode, ErrorSpec]] = {
    ErrorCode.NONE: _spec(
        "OK",
        False,
        False,
        "",
    ),
    ErrorCode.UNKNOWN_SERVER_ERROR: _spec(
        "INTERNAL",
        False,
        False,
        "The server experienced an unexpected error when processing the request.",
    ),
    ErrorCode.OFFSET_OUT_OF_RANGE: _spec(
        "OUT_OF_RANGE",
        False,
        False,
        "The requested offset is not within the range of offsets maintained by the server.",
    ),
    ErrorCode.CORRUPT_MESSAGE: _spec(
        "INVALID_ARGUMENT",
        True,
        False,
        "The record batch failed its CRC check, exceeded the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: _spec(
        "NOT_FOUND",
        True,
        True,
        "This server does not host this topic-partition.",
    ),
    ErrorCode.INVALID_FETCH_SIZE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The requested fetch size is invalid.",
    ),
    ErrorCode.LEADER_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        True,
        "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: _spec(
        "UNAVAILABLE",
        True,
        True,
        "This server is not the leader or a follower of that topic-partition.",
    ),
    ErrorCode.REQUEST_TIMED_OUT: _spec(
        "DEADLINE_EXCEEDED",
        True,
        False,
        "The request timed out.",
    ),
    ErrorCode.BROKER_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        True,
        "The storage node is not available.",
    ),
    ErrorCode.REPLICA_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        True,
        "The replica is not available for the requested topic-partition.",
    ),
    ErrorCode.MESSAGE_TOO_LARGE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The request included a record batch larger than the max message size the server will accept.",
    ),
    ErrorCode.STALE_CONTROLLER_EPOCH: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The controller moved to another instance (a newer controller epoch exists).",
    ),
    ErrorCode.OFFSET_METADATA_TOO_LARGE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The metadata field of the offset request was too large.",
    ),
    ErrorCode.NETWORK_EXCEPTION: _spec(
        "UNAVAILABLE",
        True,
        False,
        "The server disconnected before a response was received.",
    ),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: _spec(
        "UNAVAILABLE",
        True,
        False,
        "The coordinator is loading and hence can't process requests.",
    ),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        True,
        "The coordinator is not available.",
    ),
    ErrorCode.NOT_COORDINATOR: _spec(
        "UNAVAILABLE",
        True,
        True,
        "This is not the correct coordinator.",
    ),
    ErrorCode.INVALID_TOPIC_EXCEPTION: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The request attempted to perform an operation on an invalid topic.",
    ),
    ErrorCode.RECORD_LIST_TOO_LARGE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The request included record batches larger than the max message size the server will accept.",
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS: _spec(
        "UNAVAILABLE",
        True,
        False,
        "Records are rejected since there are fewer in-sync replicas than required.",
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _spec(
        "UNAVAILABLE",
        True,
        False,
        "Records are written to the log, but to fewer in-sync replicas than required.",
    ),
    ErrorCode.INVALID_REQUIRED_ACKS: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "Produce request specified an invalid value for required acks.",
    ),
    ErrorCode.ILLEGAL_GENERATION: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Specified group generation id is not valid.",
    ),
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The group member's supported protocols are incompatible with those of existing members.",
    ),
    ErrorCode.INVALID_GROUP_ID: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The configured groupId is invalid.",
    ),
    ErrorCode.UNKNOWN_MEMBER_ID: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The coordinator is not aware of this member.",
    ),
    ErrorCode.INVALID_SESSION_TIMEOUT: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The session timeout is not within the range allowed by the server.",
    ),
    ErrorCode.REBALANCE_IN_PROGRESS: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The group is rebalancing, so a rejoin is needed.",
    ),
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The committing offset data size is not valid.",
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: _spec(
        "PERMISSION_DENIED",
        False,
        False,
        "Topic authorization failed.",
    ),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: _spec(
        "PERMISSION_DENIED",
        False,
        False,
        "Group authorization failed.",
    ),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: _spec(
        "PERMISSION_DENIED",
        False,
        False,
        "Cluster authorization failed.",
    ),
    ErrorCode.INVALID_TIMESTAMP: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The timestamp of the record is out of acceptable range.",
    ),
    ErrorCode.UNSUPPORTED_VERSION: _spec(
        "UNIMPLEMENTED",
        False,
        False,
        "The version of the API is not supported.",
    ),
    ErrorCode.TOPIC_ALREADY_EXISTS: _spec(
        "ALREADY_EXISTS",
        False,
        False,
        "Topic with this name already exists.",
    ),
    ErrorCode.INVALID_PARTITIONS: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "Number of partitions is below 1.",
    ),
    ErrorCode.INVALID_REPLICATION_FACTOR: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "Replication factor is below 1 or larger than the number of available storage nodes.",
    ),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "Replica assignment is invalid.",
    ),
    ErrorCode.INVALID_CONFIG: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "Configuration is invalid.",
    ),
    ErrorCode.NOT_CONTROLLER: _spec(
        "UNAVAILABLE",
        True,
        True,
        "This is not the correct controller for this cluster.",
    ),
    ErrorCode.INVALID_REQUEST: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The request is malformed or carries invalid values.",
    ),
    ErrorCode.POLICY_VIOLATION: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Request parameters do not satisfy the configured policy.",
    ),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The server received an out of order sequence number.",
    ),
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: _spec(
        "ALREADY_EXISTS",
        False,
        False,
        "The server received a duplicate sequence number.",
    ),
    ErrorCode.INVALID_PRODUCER_EPOCH: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Producer attempted to produce with an old epoch.",
    ),
    ErrorCode.INVALID_TXN_STATE: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The producer attempted a transactional operation in an invalid state.",
    ),
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    ),
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
    ),
    ErrorCode.CONCURRENT_TRANSACTIONS: _spec(
        "UNAVAILABLE",
        True,
        False,
        "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
    ),
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
    ),
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _spec(
        "PERMISSION_DENIED",
        False,
        False,
        "Transactional Id authorization failed.",
    ),
    ErrorCode.KAFKA_STORAGE_ERROR: _spec(
        "UNAVAILABLE",
        True,
        True,
        "Disk error when trying to access log file on the disk.",
    ),
    ErrorCode.LOG_DIR_NOT_FOUND: _spec(
        "NOT_FOUND",
        False,
        False,
        "The user-specified log directory is not found in the storage node config.",
    ),
    ErrorCode.SASL_AUTHENTICATION_FAILED: _spec(
        "UNAUTHENTICATED",
        False,
        False,
        "Authentication failed.",
    ),
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Delegation Token feature is not enabled.",
    ),
    ErrorCode.DELEGATION_TOKEN_EXPIRED: _spec(
        "UNAUTHENTICATED",
        True,
        False,
        "Delegation Token is expired.",
    ),
    ErrorCode.UNKNOWN_PRODUCER_ID: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The server has no state for this producer id.",
    ),
    ErrorCode.NON_EMPTY_GROUP: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The group is not empty.",
    ),
    ErrorCode.GROUP_ID_NOT_FOUND: _spec(
        "NOT_FOUND",
        False,
        False,
        "The group id does not exist.",
    ),
    ErrorCode.FENCED_LEADER_EPOCH: _spec(
        "FAILED_PRECONDITION",
        True,
        True,
        "The leader epoch in the request is older than the epoch on the server.",
    ),
    ErrorCode.UNKNOWN_LEADER_EPOCH: _spec(
        "UNAVAILABLE",
        True,
        True,
        "The leader epoch in the request is newer than the epoch on the server.",
    ),
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The requesting client does not support the compression type of given partition.",
    ),
    ErrorCode.STALE_BROKER_EPOCH: _spec(
        "FAILED_PRECONDITION",
        True,
        False,
        "The node epoch has changed.",
    ),
    ErrorCode.OFFSET_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        False,
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    ),
    ErrorCode.MEMBER_ID_REQUIRED: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The group member needs to have a valid member id before actually entering a consumer group.",
    ),
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        False,
        "The preferred leader was not available.",
    ),
    ErrorCode.GROUP_MAX_SIZE_REACHED: _spec(
        "RESOURCE_EXHAUSTED",
        False,
        False,
        "The consumer group has reached its max size.",
    ),
    ErrorCode.FENCED_INSTANCE_ID: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The server fenced this member: another member with the same group.instance.id is active.",
    ),
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: _spec(
        "UNAVAILABLE",
        True,
        False,
        "Eligible topic partition leaders are not available.",
    ),
    ErrorCode.ELECTION_NOT_NEEDED: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "Leader election not needed for topic partition.",
    ),
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "No partition reassignment is in progress.",
    ),
    ErrorCode.INVALID_RECORD: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "This record has failed the validation on the server and hence will be rejected.",
    ),
    ErrorCode.UNSTABLE_OFFSET_COMMIT: _spec(
        "UNAVAILABLE",
        True,
        False,
        "There are unstable offsets that need to be cleared.",
    ),
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: _spec(
        "RESOURCE_EXHAUSTED",
        True,
        False,
        "The throttling quota has been exceeded.",
    ),
    ErrorCode.PRODUCER_FENCED: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "There is a newer producer with the same transactional id which fences the current one.",
    ),
    ErrorCode.INVALID_UPDATE_VERSION: _spec(
        "FAILED_PRECONDITION",
        False,
        True,
        "The given update version was invalid.",
    ),
    ErrorCode.UNKNOWN_TOPIC_ID: _spec(
        "NOT_FOUND",
        True,
        True,
        "This server does not host this topic id.",
    ),
    ErrorCode.INCONSISTENT_CLUSTER_ID: _spec(
        "FAILED_PRECONDITION",
        False,
        False,
        "The cluster id in the request does not match that of the server.",
    ),
    ErrorCode.INELIGIBLE_REPLICA: _spec(
        "FAILED_PRECONDITION",
        False,
        True,
        "The new ISR contains at least one ineligible replica.",
    ),
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: _spec(
        "OUT_OF_RANGE",
        False,
        False,
        "The requested offset is moved to tiered storage.",
    ),
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: _spec(
        "NOT_FOUND",
        False,
        False,
        "The transactionalId could not be found.",
    ),
    ErrorCode.TRANSACTION_ABORTABLE: _spec(
        "ABORTED",
        False,
        False,
        "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
    ),
    ErrorCode.UNKNOWN_NODE: _spec(
        "NOT_FOUND",
        True,
        False,
        "The node is not registered (its lease lapsed or it never registered).",
    ),
    ErrorCode.NODE_ID_IN_USE: _spec(
        "ALREADY_EXISTS",
        False,
        False,
        "Another live process holds this node id.",
    ),
    ErrorCode.INVALID_OFFSET: _spec(
        "INVALID_ARGUMENT",
        False,
        False,
        "The offset is negative or otherwise invalid.",
    ),
}


class RiverlogError(Exception):
    """An error with a wire code. Raise it anywhere; the edge maps it to a per-item code or a
    gRPC status, and the client rebuilds it from the code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message or ERRORS[self.code].message
        super().__init__(f"{self.code.name}: {self.message}")

    @property
    def retriable(self) -> bool:
        return ERRORS[self.code].retriable

    @property
    def refresh_metadata(self) -> bool:
        return ERRORS[self.code].refresh_metadata

    @property
    def grpc_status(self) -> grpc.StatusCode:
        return ERRORS[self.code].status


def code_of(value: int) -> ErrorCode:
    """The ErrorCode for a wire value; unknown values become UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def error_for(code: int, message: str = "") -> RiverlogError:
    """Rebuild the exception for a wire code (and optional server message)."""
    return RiverlogError(message or None, code_of(code))


def raise_for(code: int, message: str = "") -> None:
    """Raise the exception for a non-NONE wire code."""
    if code != ErrorCode.NONE:
        raise error_for(code, message)
