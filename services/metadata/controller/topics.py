"""Topic administration on the controller: create, delete, add partitions and alter configs,
each an etcd write fenced by the controller epoch (`ControllerElection.write`).

Each topic of a request is handled on its own and gets its own result: one bad topic never
fails the others, and a rejected topic changes nothing. A topic's partitions are written
before its `topics/<name>` record (etcd caps operations per transaction), and the image shows
a topic only with its record, so readers never see half a topic.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from riverlog.common.errors import ERRORS, ErrorCode, RiverlogError

from ..config import MetadataConfig
from ..image import MetadataImage
from ..records import TopicRecord
from . import topic_validation as v
from . import topic_writes as writes
from .election import ControllerElection
from .placement import NodePlacement, assign_replicas, start_index_for_new_partitions

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[tuple[str, str], ...] = ()


TRANSACTION_STATE_TOPIC = "__transaction_state"


def with_internal_defaults(topic: NewTopic, config: MetadataConfig, storage_nodes: int) -> NewTopic:
    """`__transaction_state` asked for with defaults (-1) gets Kafka's
    transaction.state.log.* settings, the factor capped at the live storage nodes: compacted,
    min.insync.replicas transaction.state.log.min.isr (capped at the factor). The gateway asks
    for it on the first FindCoordinator of a transactional id, as Kafka's brokers create it."""
    if topic.name != TRANSACTION_STATE_TOPIC:
        return topic
    rf = topic.replication_factor
    if rf == -1:
        rf = max(1, min(config.transaction_state_log_replication_factor, storage_nodes))
    partitions = topic.num_partitions
    if partitions == -1:
        partitions = config.transaction_state_log_num_partitions
    defaults = {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(min(config.transaction_state_log_min_isr, rf)),
        "retention.ms": "-1",
    }
    return NewTopic(topic.name, partitions, rf, tuple({**defaults, **dict(topic.configs)}.items()))


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topic_id: str = ""


def new_topic_id() -> str:
    """A fresh topic id: 22 url-safe base64 characters of a random UUID, as Kafka's."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class TopicController:
    """Topic writes. Called from RPC handlers on the event loop of the controller."""

    def __init__(
        self,
        election: ControllerElection,
        image: MetadataImage,
        config: MetadataConfig,
        rng: random.Random | None = None,
    ) -> None:
        self.election = election
        self.image = image
        self.config = config
        self.keys = image.keys
        self.rng = rng or random.Random()
        # One topic change at a time: a multi-transaction create or grow never interleaves
        # with another change of the same topic.
        self._writes = asyncio.Lock()

    def _storage_nodes(self) -> list[NodePlacement]:
        """Where new replicas may go: live storage nodes not being drained."""
        return [
            NodePlacement(n.node_id, n.rack)
            for n in self.image.cluster.nodes_of_kind("storage")
            if n.node_id not in self.image.draining
        ]

    async def _per_topic(
        self, names: Sequence[str], handle: Callable[[str, int], Awaitable[str]]
    ) -> list[TopicResult]:
        """Run `handle(name, index)` for each topic; an error becomes that topic's result.
        Duplicate names fail as INVALID_REQUEST. After a fencing error the rest are refused
        too (this instance is no longer the controller)."""
        dup = v.duplicates(names)
        results: list[TopicResult] = []
        fenced: RiverlogError | None = None
        for i, name in enumerate(names):
            if name in dup:
                results.append(
                    TopicResult(name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                )
                continue
            if fenced is not None:
                results.append(TopicResult(name, fenced.code, fenced.message))
                continue
            try:
                async with self._writes:
                    topic_id = await handle(name, i)
                results.append(TopicResult(name, topic_id=topic_id))
            except RiverlogError as exc:
                if exc.code in (ErrorCode.STALE_CONTROLLER_EPOCH, ErrorCode.NOT_CONTROLLER):
                    fenced = exc
                results.append(TopicResult(name, exc.code, exc.message))
            except Exception:
                log.exception("topic %r: unexpected error", name)
                results.append(
                    TopicResult(
                        name,
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        ERRORS[ErrorCode.UNKNOWN_SERVER_ERROR].message,
                    )
                )
        return results

    async def _run(self, planned: Sequence[writes.Write]) -> bool:
        """Run the writes in order through the fence; False (and nothing more written) as soon
        as one's compares fail."""
        for write in planned:
            if await self.election.write(write.compares, write.ops) is None:
                return False
        return True

    # --- create ---------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        created: list[str] = []

        async def create(name: str, i: int) -> str:
            topic_id = await self._create(topics[i], validate_only, created)
            created.append(name)
            return topic_id

        return await self._per_topic([t.name for t in topics], create)

    async def _create(self, topic: NewTopic, validate_only: bool, created: list[str]) -> str:
        v.validate_topic_name(topic.name)
        topic = with_internal_defaults(topic, self.config, len(self._storage_nodes()))
        if topic.name in self.image.cluster.topics:
            raise RiverlogError(
                f"Topic '{topic.name}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS
            )
        v.check_collision(topic.name, [*self.image.cluster.topics, *created])
        partitions = v.resolve_partitions(topic.num_partitions, self.config.num_partitions)
        nodes = self._storage_nodes()
        rf = v.resolve_replication_factor(
            topic.replication_factor, self.config.default_replication_factor, len(nodes)
        )
        configs = v.validate_configs(dict(topic.configs))
        assignment = assign_replicas(nodes, partitions, rf, rng=self.rng)
        if validate_only:
            return ""
        topic_id = new_topic_id()
        record = TopicRecord(topic_id, partitions, configs, v.is_internal(topic.name))
        if not await self._run(writes.create_topic(self.keys, topic.name, record, assignment)):
            raise _exists(topic.name)
        log.info(
            "created topic %s (%s): %d partitions, rf %d", topic.name, topic_id, partitions, rf
        )
        return topic_id

    # --- delete ---------------------------------------------------------------------------------

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]:
        async def delete(name: str, _: int) -> str:
            entry = await self.image.store.get(self.keys.topic(name))
            if entry is None:
                raise _unknown(name)
            if not await self._run([writes.delete_topic(self.keys, name, entry.mod_revision)]):
                raise _unknown(name)
            log.info("deleted topic %s", name)
            return TopicRecord.decode(entry.value).topic_id

        return await self._per_topic(list(names), delete)

    # --- add partitions --------------------------------------------------------------------------

    async def create_partitions(
        self, counts: Sequence[tuple[str, int]], validate_only: bool = False
    ) -> list[TopicResult]:
        async def grow(name: str, i: int) -> str:
            return await self._grow(name, counts[i][1], validate_only)

        return await self._per_topic([name for name, _ in counts], grow)

    async def _grow(self, name: str, count: int, validate_only: bool) -> str:
        entry = await self.image.store.get(self.keys.topic(name))
        info = self.image.cluster.topics.get(name)
        if entry is None or info is None:
            raise _unknown(name)
        record = TopicRecord.decode(entry.value)
        v.validate_partition_increase(name, record.partitions, count)
        nodes = self._storage_nodes()
        rf = len(info.partitions[0].replicas) if info.partitions else 1
        start = (
            start_index_for_new_partitions(nodes, info.partitions[0].replicas[0])
            if info.partitions
            else -1
        )
        assignment = assign_replicas(
            nodes,
            count - record.partitions,
            rf,
            start_index=start,
            start_partition=record.partitions,
            rng=self.rng,
        )
        if validate_only:
            return record.topic_id
        grow = writes.add_partitions(self.keys, name, record, count, assignment, entry.mod_revision)
        if not await self._run(grow):
            raise RiverlogError(
                f"Topic {name} changed concurrently; retry.", ErrorCode.INVALID_PARTITIONS
            )
        log.info("topic %s: %d → %d partitions", name, record.partitions, count)
        return record.topic_id

    # --- alter configs ---------------------------------------------------------------------------

    async def alter_configs(
        self, changes: Sequence[tuple[str, Sequence[v.ConfigOp]]], validate_only: bool = False
    ) -> list[TopicResult]:
        async def alter(name: str, i: int) -> str:
            for _ in range(5):
                entry = await self.image.store.get(self.keys.topic(name))
                if entry is None:
                    raise _unknown(name)
                record = TopicRecord.decode(entry.value)
                configs = v.apply_config_ops(record.configs, changes[i][1])
                if validate_only:
                    return record.topic_id
                write = writes.alter_configs(self.keys, name, record, configs, entry.mod_revision)
                if await self._run([write]):
                    log.info("topic %s configs: %s", name, configs)
                    return record.topic_id
            raise RiverlogError(f"Topic {name} keeps changing; retry.", ErrorCode.INVALID_REQUEST)

        return await self._per_topic([name for name, _ in changes], alter)


def _exists(name: str) -> RiverlogError:
    return RiverlogError(f"Topic '{name}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)


def _unknown(name: str) -> RiverlogError:
    return RiverlogError(
        f"This server does not host this topic: {name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
