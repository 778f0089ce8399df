"""Consumer-group administration for `AdminClient`: list, describe and delete groups, read a
group's committed offsets and set them (Kafka's Admin listConsumerGroups,
describeConsumerGroups, deleteConsumerGroups, listConsumerGroupOffsets,
alterConsumerGroupOffsets), over the gateway's group RPCs.

`GroupAdminMixin` needs only the admin client's `_call` (one RPC with retries of failed calls);
answers whose code says the coordinator is moving or loading (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, ...) are asked again here until default.api.timeout.ms. Member
assignments of "consumer" groups are decoded from Kafka's ConsumerProtocol bytes. Thread-safe,
as the admin client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from riverlog.common.assignors import CONSUMER_PROTOCOL_TYPE, decode_assignment
from riverlog.common.errors import ErrorCode, RiverlogError, code_of, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb

from .config import AdminConfig
from .consumer.group.api import OffsetAndMetadata
from .consumer.group.grpc_api import committed_from_proto

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as its coordinator reports it. `state`: Empty, PreparingRebalance,
    CompletingRebalance, Stable or Dead; `protocol`: the chosen assignor."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation_id: int
    leader: str
    members: tuple[MemberDescription, ...]


def _member_from_proto(m: pb.DescribedGroupMember, protocol_type: str) -> MemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    if protocol_type == CONSUMER_PROTOCOL_TYPE and m.member_assignment:
        try:
            assignment = tuple(decode_assignment(m.member_assignment).partitions)
        except ValueError:
            assignment = ()
    return MemberDescription(
        m.member_id,
        m.group_instance_id if m.HasField("group_instance_id") else None,
        m.client_id,
        m.client_host,
        assignment,
    )


def group_from_proto(g: pb.DescribedGroup) -> GroupDescription:
    return GroupDescription(
        g.group_id,
        g.group_state,
        g.protocol_type,
        g.protocol_data,
        g.generation_id,
        g.leader,
        tuple(_member_from_proto(m, g.protocol_type) for m in g.members),
    )


class GroupAdminMixin:
    """Mixed into AdminClient, which provides `config` and `_call` (declared here, so mypy
    checks AdminClient's against them; see decision 0020)."""

    config: AdminConfig
    _call: Callable[[Callable[[Any], Any], Any], Any]

    def _until_settled(self, method: Callable[[Any], Any], request: Any) -> Any:
        """`_call`, asked again while the answer's own code is retriable (coordinator moving)."""
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        while True:
            response = self._call(method, request)
            code = code_of(response.error_code)
            if code == ErrorCode.NONE:
                return response
            error = error_for(code, response.error_message)
            if not error.retriable or time.monotonic() + RETRY_BACKOFF_S > deadline:
                raise error
            time.sleep(RETRY_BACKOFF_S)

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group every coordinator knows (optionally only in these states), by id."""
        request = pb.ListGroupsRequest(states_filter=list(states))
        response = self._until_settled(lambda s: s.ListGroups, request)
        listed = [GroupListing(g.group_id, g.protocol_type, g.group_state) for g in response.groups]
        return sorted(listed, key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol, generation and members (with assignments) of each group; a group
        that does not exist is reported in state Dead, as Kafka does."""
        ids = list(dict.fromkeys(group_ids))
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        out: dict[str, GroupDescription] = {}
        while ids:
            response = self._until_settled(
                lambda s: s.DescribeGroups, pb.DescribeGroupsRequest(groups=ids)
            )
            retry: list[str] = []
            for g in response.groups:
                if g.error_code == ErrorCode.NONE:
                    out[g.group_id] = group_from_proto(g)
                    continue
                error = error_for(g.error_code, g.error_message)
                if error.retriable and time.monotonic() + RETRY_BACKOFF_S < deadline:
                    retry.append(g.group_id)
                else:
                    raise RiverlogError(f"group {g.group_id!r}: {error.message}", error.code)
            ids = retry
            if ids:
                time.sleep(RETRY_BACKOFF_S)
        return out

    def delete_groups(
        self, group_ids: Iterable[str], *, raise_on_error: bool = True
    ) -> dict[str, RiverlogError | None]:
        """Delete empty groups and their committed offsets (NON_EMPTY_GROUP while members
        remain, GROUP_ID_NOT_FOUND for unknown ones)."""
        request = pb.DeleteGroupsRequest(groups=list(dict.fromkeys(group_ids)))
        response = self._until_settled(lambda s: s.DeleteGroups, request)
        outcomes: dict[str, RiverlogError | None] = {}
        for r in response.results:
            outcomes[r.group_id] = None
            if r.error_code != ErrorCode.NONE:
                cause = error_for(r.error_code, r.error_message)
                outcomes[r.group_id] = RiverlogError(
                    f"group {r.group_id!r}: {cause.message}", cause.code
                )
        if raise_on_error:
            for error in outcomes.values():
                if error is not None:
                    raise error
        return outcomes

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets: of `partitions`, or every one it has (partitions
        with none committed are left out). As Kafka's listConsumerGroupOffsets, a partition
        answered with its own error (TOPIC_AUTHORIZATION_FAILED for a topic the caller may not
        DESCRIBE) is left out too, with a warning in the log; an error of the whole call (the
        group refused: GROUP_AUTHORIZATION_FAILED) raises."""
        wanted = None if partitions is None else list(partitions)
        topics: dict[str, list[int]] = {}
        for tp in wanted or []:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = pb.OffsetFetchRequest(
            group_id=group_id,
            topics=[pb.OffsetFetchTopic(name=t, partitions=p) for t, p in topics.items()],
            all_topics=wanted is None,
        )
        response = self._until_settled(lambda s: s.OffsetFetch, request)
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, c in committed_from_proto(response).items():
            if c.error_code != ErrorCode.NONE:
                log.warning("skipping the offset of %s: %s", tp, code_of(c.error_code).name)
                continue
            if c.offset >= 0:
                out[tp] = OffsetAndMetadata(c.offset, c.metadata, c.leader_epoch)
        return dict(sorted(out.items()))

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """Set committed offsets of a group with no active members (a commit outside any
        generation, as Kafka's tools do); the coordinator refuses while members are in it."""
        topics: dict[str, list[pb.OffsetCommitPartition]] = {}
        for tp, value in sorted(offsets.items()):
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            topics.setdefault(tp.topic, []).append(
                pb.OffsetCommitPartition(
                    partition=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    metadata=om.metadata,
                )
            )
        request = pb.OffsetCommitRequest(
            group_id=group_id,
            generation_id=-1,
            member_id="",
            topics=[pb.OffsetCommitTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        response = self._until_settled(lambda s: s.OffsetCommit, request)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    cause = error_for(p.error_code, p.error_message)
                    hint = (
                        " (the group has active members: stop them first)"
                        if cause.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
                        else ""
                    )
                    raise RiverlogError(
                        f"{topic.name}-{p.partition}: {cause.message}{hint}", cause.code
                    )
