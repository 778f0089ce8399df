"""`AdminClient`: topic and cluster administration through the gateway, synchronous.

Every method blocks until the gateway answers and returns plain values. Methods that act on
several topics report per topic: by default the first topic that failed raises its RiverlogError
(the message names the topic) after all were attempted; with `raise_on_error=False` they return
`{topic: None | RiverlogError}` instead, so a caller can see every outcome. Whole-request
failures that are retriable (a gateway restarting, no controller for a moment) are retried with
retry.backoff.ms up to `retries` times within default.api.timeout.ms.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, common_pb2, data_pb2

from ._closing import Closing
from ._connection import GatewayConnection
from ._offsets import OffsetAndTimestamp, list_offsets
from .acl_admin import AclAdminMixin
from .balance_admin import BalanceAdminMixin
from .config import AdminConfig
from .errors import ClientClosedError
from .group_admin import GroupAdminMixin
from .log_dirs_admin import LogDirsAdminMixin
from .node_config_admin import ConfigEntry as ConfigEntry  # re-exported: its old home
from .node_config_admin import NodeConfigAdminMixin
from .quota_admin import QuotaAdminMixin
from .reassignment_admin import ReassignmentAdminMixin
from .transaction_admin import TransactionAdminMixin

_ids = itertools.count(1)
Outcomes = dict[str, RiverlogError | None]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create; -1 takes the cluster default (num.partitions,
    default.replication.factor). `configs` uses Kafka's topic config names."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()  # a reassignment in progress (KIP-455)
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str]  # explicitly set configs only


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: int
    kind: str  # storage, gateway, coordinator, quota, metadata
    host: str
    port: int
    rack: str


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int  # metadata instance of the active controller; -1 if none
    controller_epoch: int
    nodes: tuple[NodeInfo, ...]
    metadata_instances: tuple[tuple[int, str, int, bool], ...]  # id, host, port, is_controller
    offline_partitions: int = 0  # partitions with no leader
    under_replicated_partitions: int = 0  # partitions whose ISR is smaller than their replicas
    draining: tuple[int, ...] = ()  # storage nodes being drained (alter_node_draining)


def _kind(kind: int) -> str:
    return str(common_pb2.NodeKind.Name(kind)).removeprefix("NODE_KIND_").lower()


def _topic(meta: common_pb2.TopicMetadata) -> TopicDescription:
    partitions = tuple(
        PartitionInfo(
            p.partition,
            p.leader,
            p.leader_epoch,
            tuple(p.replicas),
            tuple(p.isr),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
        )
        for p in sorted(meta.partitions, key=lambda p: p.partition)
    )
    configs = {c.name: c.value for c in meta.configs}
    return TopicDescription(meta.name, meta.topic_id, meta.internal, partitions, configs)


class AdminClient(
    GroupAdminMixin,
    QuotaAdminMixin,
    ReassignmentAdminMixin,
    LogDirsAdminMixin,
    BalanceAdminMixin,
    TransactionAdminMixin,
    NodeConfigAdminMixin,
    AclAdminMixin,
    Closing,
):
    """Administers topics, consumer groups (`group_admin.py`), client quotas and users
    (`quota_admin.py`), reassignments (`reassignment_admin.py`), log dirs and replica sizes
    (`log_dirs_admin.py`), transactions
    (`transaction_admin.py`), dynamic node configs (`node_config_admin.py`) and ACLs
    (`acl_admin.py`). Thread-safe
    (any thread may call any method).

    with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("events", num_partitions=6, replication_factor=3)])
    """

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self.config = config = AdminConfig.from_kafka(conf, **kwargs)
        client_id = config.client_id or f"riverlog-admin-{next(_ids)}"
        self._conn = GatewayConnection(config.bootstrap_servers, client_id, config.credentials)
        self._closed = False

    def _call(self, method: Callable[[Any], Any], request: Any) -> Any:
        """One admin RPC, retrying retriable failures."""
        if self._closed:
            raise ClientClosedError("admin client")
        config = self.config
        deadline = time.monotonic() + config.default_api_timeout_ms / 1000
        timeout_s = config.request_timeout_ms / 1000
        for attempt in itertools.count():
            try:
                return self._conn.call(method, request, timeout_s)
            except RiverlogError as e:
                remaining = deadline - time.monotonic()
                if not e.retriable or attempt >= config.retries or remaining <= 0:
                    raise
                backoff = min(config.retry_backoff_ms * 2**attempt, config.retry_backoff_max_ms)
                time.sleep(min(backoff / 1000, remaining))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _outcomes(results: Iterable[admin_pb2.TopicResult], raise_on_error: bool) -> Outcomes:
        outcomes: Outcomes = {}
        for result in results:
            error = None
            if result.error_code:  # NONE is 0
                cause = error_for(result.error_code, result.error_message)
                error = RiverlogError(f"topic {result.name!r}: {cause.message}", cause.code)
            outcomes[result.name] = error
        if raise_on_error:
            for error in outcomes.values():
                if error is not None:
                    raise error
        return outcomes

    # ---- topics -------------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> Outcomes:
        """Create topics; `{name: None | error}` (see the module doc for errors)."""
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs={k: str(v) for k, v in t.configs.items()},
                )
                for t in new_topics
            ],
            validate_only=validate_only,
        )
        response = self._call(lambda s: s.CreateTopics, request)
        return self._outcomes(response.topics, raise_on_error)

    def delete_topics(self, names: Iterable[str], *, raise_on_error: bool = True) -> Outcomes:
        """Delete topics and their data."""
        request = admin_pb2.DeleteTopicsRequest(names=list(names))
        response = self._call(lambda s: s.DeleteTopics, request)
        return self._outcomes(response.topics, raise_on_error)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Names of all topics, sorted."""
        request = admin_pb2.ListTopicsRequest(include_internal=include_internal)
        return sorted(self._call(lambda s: s.ListTopics, request).names)

    def describe_topics(
        self, names: Iterable[str] | None = None, *, include_internal: bool = False
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of topics (all if `names` is None); raises the
        error of the first topic that cannot be described (e.g. unknown)."""
        request = admin_pb2.DescribeTopicsRequest(
            names=list(names or ()), include_internal=include_internal
        )
        response = self._call(lambda s: s.DescribeTopics, request)
        out: dict[str, TopicDescription] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                cause = error_for(topic.error_code, topic.error_message)
                raise RiverlogError(f"topic {topic.name!r}: {cause.message}", cause.code)
            out[topic.name] = _topic(topic.metadata)
        return out

    def describe_configs(self, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """Every config of each topic, defaults included (`is_default`)."""
        request = admin_pb2.DescribeConfigsRequest(topics=list(topics))
        response = self._call(lambda s: s.DescribeConfigs, request)
        out: dict[str, dict[str, ConfigEntry]] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                cause = error_for(topic.error_code, topic.error_message)
                raise RiverlogError(f"topic {topic.name!r}: {cause.message}", cause.code)
            out[topic.name] = {
                c.name: ConfigEntry(c.name, c.value, c.is_default) for c in topic.configs
            }
        return out

    def alter_configs(
        self,
        changes: Mapping[str, Mapping[str, object]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> Outcomes:
        """Incremental change (Kafka's IncrementalAlterConfigs): `{topic: {name: value}}`; a
        value of None deletes the key (back to the default)."""
        op = admin_pb2.AlterConfigsRequest.Op
        request = admin_pb2.AlterConfigsRequest(
            topics=[
                admin_pb2.AlterConfigsRequest.Topic(
                    name=topic,
                    ops=[
                        op(name=k, type=op.DELETE)
                        if v is None
                        else op(name=k, value=str(v).lower() if isinstance(v, bool) else str(v))
                        for k, v in ops.items()
                    ],
                )
                for topic, ops in changes.items()
            ],
            validate_only=validate_only,
        )
        response = self._call(lambda s: s.AlterConfigs, request)
        return self._outcomes(response.topics, raise_on_error)

    def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> Outcomes:
        """Grow topics to `{topic: new total partition count}`."""
        request = admin_pb2.CreatePartitionsRequest(
            topics=[
                admin_pb2.CreatePartitionsRequest.Topic(name=n, count=c)
                for n, c in new_totals.items()
            ],
            validate_only=validate_only,
        )
        response = self._call(lambda s: s.CreatePartitions, request)
        return self._outcomes(response.topics, raise_on_error)

    # ---- records and offsets ------------------------------------------------------------

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Move each partition's log start to the offset given (-1: the high watermark);
        returns the new low watermarks. Raises the first partition's error."""
        request = data_pb2.DeleteRecordsRequest(
            partitions=[
                data_pb2.DeleteRecordsPartition(topic=tp.topic, partition=tp.partition, offset=o)
                for tp, o in before.items()
            ],
            timeout_ms=self.config.request_timeout_ms,
        )
        response = self._call(lambda s: s.DeleteRecords, request)
        out: dict[TopicPartition, int] = {}
        for p in response.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if p.error_code != ErrorCode.NONE:
                cause = error_for(p.error_code, p.error_message)
                raise RiverlogError(f"{tp}: {cause.message}", cause.code)
            out[tp] = p.low_watermark
        return out

    def list_offsets(
        self, queries: Mapping[TopicPartition, int], *, read_committed: bool = False
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Offsets by Kafka's timestamp convention: -2 earliest, -1 latest, -3 the record with
        the largest timestamp, else the first record at or after that time (None if none)."""
        if self._closed:
            raise ClientClosedError("admin client")
        config = self.config
        return list_offsets(
            self._conn,
            queries,
            timeout_s=config.default_api_timeout_ms / 1000,
            request_timeout_s=config.request_timeout_ms / 1000,
            backoff_s=config.retry_backoff_ms / 1000,
            read_committed=read_committed,
        )

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the active controller and the live nodes."""
        r = self._call(lambda s: s.DescribeCluster, admin_pb2.DescribeClusterRequest())
        nodes = tuple(NodeInfo(n.node_id, _kind(n.kind), n.host, n.port, n.rack) for n in r.nodes)
        instances = tuple(
            (m.instance_id, m.host, m.port, m.is_controller) for m in r.metadata_instances
        )
        return ClusterDescription(
            r.cluster_id,
            r.controller_id,
            r.controller_epoch,
            nodes,
            instances,
            r.offline_partitions,
            r.under_replicated_partitions,
            tuple(r.draining_nodes),
        )

    def elect_leaders(
        self,
        election_type: str = "preferred",
        partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, RiverlogError | None]:
        """Kafka's electLeaders: `"preferred"` moves leadership to each partition's first
        replica where it is live and in sync; `"unclean"` gives a leaderless partition any live
        replica. `partitions` None means every partition. Per partition: None when elected, else
        the error (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION)."""
        types = {
            "preferred": admin_pb2.ELECTION_TYPE_PREFERRED,
            "unclean": admin_pb2.ELECTION_TYPE_UNCLEAN,
        }
        if election_type not in types:
            raise ValueError(f"election_type must be one of {sorted(types)}: {election_type!r}")
        request = admin_pb2.ElectLeadersRequest(
            election_type=types[election_type],
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions or ()
            ],
        )
        response = self._call(lambda s: s.ElectLeaders, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return {
            TopicPartition(r.topic, r.partition): (
                None if r.error_code == ErrorCode.NONE else error_for(r.error_code, r.error_message)
            )
            for r in response.partitions
        }

    # ---- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the channels. Idempotent."""
        self._closed = True
        self._conn.close()
