"""One member of a classic group (Kafka's `ClassicGroupMember`) and the domain values of the
group requests and responses.

A member carries what the coordinator needs to run the protocol: its protocols with metadata in
preference order, its timeouts, its assignment once synced, and the parked reply of a JoinGroup
or SyncGroup waiting for the rebalance to progress. Replies are plain callables, so the domain
never touches asyncio futures or gRPC: the shard wraps them, unit tests record them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from riverlog.common.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    generation_id: int = -1
    protocol_type: str = ""
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str = ""
    protocol_name: str = ""
    assignments: Sequence[tuple[str, bytes]] = ()


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    protocol_type: str = ""
    protocol_name: str = ""
    assignment: bytes = b""


JoinReply = Callable[[JoinResponse], None]
SyncReply = Callable[[SyncResponse], None]


@dataclass(eq=False)
class Member:
    """A member of one group. Owned by the group's shard task."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_reply: JoinReply | None = None
    sync_reply: SyncReply | None = None
    is_new: bool = False
    """Joined in the current rebalance for the first time (Kafka's `isNew`): expires after the
    new-member join timeout if it never rejoins."""
    supported_names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.supported_names = frozenset(p.name for p in self.protocols)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def metadata_for(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        """Same protocols with the same metadata in the same order (Kafka's `matches`)."""
        return tuple(protocols) == self.protocols

    def update(self, request: JoinRequest) -> None:
        self.protocols = request.protocols
        self.supported_names = frozenset(p.name for p in request.protocols)
        self.protocol_type = request.protocol_type
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.client_id:
            self.client_id = request.client_id
        if request.client_host:
            self.client_host = request.client_host

    def vote(self, candidates: frozenset[str]) -> str:
        """The first of this member's protocols among `candidates` (Kafka's `vote`)."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def reply_join(self, response: JoinResponse) -> bool:
        reply, self.join_reply = self.join_reply, None
        if reply is None:
            return False
        reply(response)
        return True

    def reply_sync(self, response: SyncResponse) -> bool:
        reply, self.sync_reply = self.sync_reply, None
        if reply is None:
            return False
        reply(response)
        return True
