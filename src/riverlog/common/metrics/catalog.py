"""Every metric a Riverlog process serves on `/metrics`, with the Kafka JMX name it stands for
(decision 0033). The single source of truth for names: collectors build their families from
these specs, the Grafana dashboard in `deploy/` may only use names listed here (a unit test
checks), and the README's table is this one.

Names are `riverlog_`-prefixed, snake_case, in Prometheus' conventions (counters are served
with `_total`, histograms with `_bucket`/`_sum`/`_count`, base units: bytes and seconds); each
HELP text ends with the Kafka name in brackets, so an operator who knows Kafka's dashboards
finds their metric by searching for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric family: its name (without `_total`), kind, labels, the processes that serve
    it, what it means and Kafka's name for it."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    served_by: tuple[str, ...]
    description: str
    kafka: str

    @property
    def help(self) -> str:
        return f"{self.description} [{self.kafka}]"

    @property
    def series_names(self) -> tuple[str, ...]:
        """The names of the samples this family is served as."""
        if self.kind is Kind.COUNTER:
            return (f"{self.name}_total",)
        if self.kind is Kind.HISTOGRAM:
            return tuple(f"{self.name}_{s}" for s in ("bucket", "sum", "count"))
        return (self.name,)


C, G, H = Kind.COUNTER, Kind.GAUGE, Kind.HISTOGRAM
TOPIC = ("topic",)
PARTITION = ("topic", "partition")
_SERVICES = ("metadata", "storage", "coordinator", "quota", "gateway")

# fmt: off
_SPECS = (
    MetricSpec(
        "riverlog_topic_bytes_in", C, TOPIC, ("gateway",),
        "record batch bytes produced to the topic through this gateway",
        "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=*",
    ),
    MetricSpec(
        "riverlog_topic_records_in", C, TOPIC, ("gateway",),
        "records produced to the topic through this gateway (acknowledged appends)",
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=*",
    ),
    MetricSpec(
        "riverlog_topic_bytes_out", C, TOPIC, ("gateway",),
        "record batch bytes fetched from the topic by clients through this gateway",
        "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic=*",
    ),
    MetricSpec(
        "riverlog_topic_records_out", C, TOPIC, ("gateway",),
        "offsets delivered to clients fetching the topic through this gateway (records, "
        "counting transaction markers and compacted gaps)",
        "no Kafka broker metric; consumer-side records-consumed-total",
    ),
    MetricSpec(
        "riverlog_request_duration_seconds", H, ("service", "api"), _SERVICES,
        "time from a request's arrival to its answer, per gRPC method; _count is the request "
        "count (rate() of it is Kafka's RequestsPerSec)",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs|RequestsPerSec,request=*",
    ),
    MetricSpec(
        "riverlog_request_errors", C, ("service", "api", "error"), _SERVICES,
        "requests answered with an error status, per gRPC method and Kafka error name",
        "kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=*,error=*",
    ),
    MetricSpec(
        "riverlog_under_replicated_partitions", G, ("node_id",), ("storage",),
        "partitions led by this storage node whose ISR is smaller than their replica set",
        "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
    ),
    MetricSpec(
        "riverlog_isr_shrinks", C, ("node_id",), ("storage",),
        "ISR shrinks this storage node asked for as leader",
        "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
    ),
    MetricSpec(
        "riverlog_isr_expands", C, ("node_id",), ("storage",),
        "ISR expansions this storage node asked for as leader",
        "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec",
    ),
    MetricSpec(
        "riverlog_partitions", G, ("node_id",), ("storage",),
        "replicas hosted by this storage node",
        "kafka.server:type=ReplicaManager,name=PartitionCount",
    ),
    MetricSpec(
        "riverlog_leader_partitions", G, ("node_id",), ("storage",),
        "partitions this storage node leads",
        "kafka.server:type=ReplicaManager,name=LeaderCount",
    ),
    MetricSpec(
        "riverlog_log_size_bytes", G, ("node_id", "topic", "partition"), ("storage",),
        "bytes of the replica's log segments on this storage node",
        "kafka.log:type=Log,name=Size,topic=*,partition=*",
    ),
    MetricSpec(
        "riverlog_log_end_offset", G, ("node_id", "topic", "partition"), ("storage",),
        "the replica's log end offset on this storage node",
        "kafka.log:type=Log,name=LogEndOffset,topic=*,partition=*",
    ),
    MetricSpec(
        "riverlog_producer_ids", G, ("node_id",), ("storage",),
        "client producer ids (idempotent or transactional) with state on this node's replicas "
        "(a producer writing to several partitions here counts once per partition; the "
        "coordinators' own ids on __consumer_offsets and __transaction_state are left out)",
        "kafka.server:type=ReplicaManager,name=ProducerIdCount",
    ),
    MetricSpec(
        "riverlog_consumer_fetches", C, ("node_id", "topic", "partition", "replica"),
        ("storage",),
        "partitions answered to consumer fetches by this storage node, as the partition's "
        "leader or as a follower (a consumer with client.rack reading from its rack's replica)",
        "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec,topic=*",
    ),
    MetricSpec(
        "riverlog_zero_copy_connections", C, ("node_id",), ("storage",),
        "connections accepted on this storage node's zero-copy port (gateways' fetch pools "
        "and produce lanes): a rate that does not settle means connections are not reused",
        "kafka.server:type=socket-server-metrics,listener=*,name=connection-creation-total",
    ),
    MetricSpec(
        "riverlog_direct_connections", C, ("node_id",), ("storage",),
        "connections accepted on this storage node's direct port (clients holding grants, "
        "decision 0047)",
        "kafka.server:type=socket-server-metrics,listener=*,name=connection-creation-total",
    ),
    MetricSpec(
        "riverlog_direct_connections_closed", C, ("node_id", "reason"), ("storage",),
        "direct-port connections the node closed: `limit` at accept (max.connections, "
        "max.connections.per.ip), `no_grant` (no grant within direct.grant.timeout.ms), "
        "`idle` (connections.max.idle.ms)",
        "kafka.server:type=socket-server-metrics,listener=*,name=connection-close-total",
    ),
    MetricSpec(
        "riverlog_direct_grants", C, ("node_id", "result"), ("storage",),
        "grant frames this storage node's direct port accepted or refused (bad signature, "
        "another node's, expired); a refused one leaves the connection's previous grant",
        "kafka.server:type=DelegationTokenManager (no direct equivalent)",
    ),
    MetricSpec(
        "riverlog_direct_bytes", C, ("node_id", "operation"), ("storage",),
        "bytes under grants on the direct port: record bytes sent to fetches (read) and "
        "produce frame bytes taken (write)",
        "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec / BytesInPerSec",
    ),
    MetricSpec(
        "riverlog_direct_budget_refusals", C, ("node_id",), ("storage",),
        "frames answered DELEGATION_TOKEN_EXPIRED on the direct port (grant expired or its "
        "byte budget spent): clients renewing their grants",
        "kafka.server:type=DelegationTokenManager (no direct equivalent)",
    ),
    MetricSpec(
        "riverlog_remote_copy_bytes", C, ("node_id",), ("storage",),
        "segment bytes this storage node copied to the remote store as leader (tiered storage)",
        "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec",
    ),
    MetricSpec(
        "riverlog_remote_copy_lag_bytes", G, ("node_id", "topic", "partition"), ("storage",),
        "bytes of closed local segments not yet copied to the remote store (leaders of "
        "remote.storage.enable topics)",
        "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagBytes,topic=*,partition=*",
    ),
    MetricSpec(
        "riverlog_remote_log_size_bytes", G, ("node_id", "topic", "partition"), ("storage",),
        "bytes of the replica's finished remote segments",
        "kafka.server:type=BrokerTopicMetrics,name=RemoteLogSizeBytes,topic=*,partition=*",
    ),
    MetricSpec(
        "riverlog_remote_fetch_requests", C, ("node_id",), ("storage",),
        "partition reads served from the remote store (offsets below the local log start)",
        "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchRequestsPerSec",
    ),
    MetricSpec(
        "riverlog_remote_cache_lookups", C, ("node_id", "result"), ("storage",),
        "lookups in the cache of remote chunks and indexes, by result (hit, miss): the hit "
        "ratio of remote reads",
        "kafka.log.remote:type=RemoteLogManager (no direct equivalent: Kafka caches indexes only)",
    ),
    MetricSpec(
        "riverlog_controller_active", G, ("instance_id",), ("metadata",),
        "1 on the metadata instance that is the active controller, else 0 (sums to 1)",
        "kafka.controller:type=KafkaController,name=ActiveControllerCount",
    ),
    MetricSpec(
        "riverlog_offline_partitions", G, (), ("metadata",),
        "partitions without a leader (served by the active controller only)",
        "kafka.controller:type=KafkaController,name=OfflinePartitionsCount",
    ),
    MetricSpec(
        "riverlog_leader_elections", C, ("instance_id",), ("metadata",),
        "partition leader changes this instance wrote as controller",
        "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
    ),
    MetricSpec(
        "riverlog_consumer_groups", G, ("state",), ("coordinator",),
        "consumer groups coordinated by this instance, by state",
        "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups*",
    ),
    MetricSpec(
        "riverlog_consumer_group_committed_offset", G, ("group", "topic", "partition"),
        ("coordinator",),
        "the group's committed offset for the partition",
        "kafka-lag-exporter kafka_consumergroup_group_offset; Burrow's offset",
    ),
    MetricSpec(
        "riverlog_consumer_group_lag", G, ("group", "topic", "partition"), ("coordinator",),
        "high watermark minus the group's committed offset, never negative",
        "kafka-lag-exporter kafka_consumergroup_group_lag; kafka-consumer-groups.sh LAG; "
        "consumer records-lag",
    ),
    MetricSpec(
        "riverlog_client_throttle_time_ms", G, ("quota_type", "user", "client_id"), ("quota",),
        "how long the quota service currently holds back the client (cluster-wide view)",
        "kafka.server:type={Produce,Fetch,Request},user=*,client-id=*,name=throttle-time",
    ),
)
# fmt: on

CATALOG: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}


def spec(name: str) -> MetricSpec:
    """The spec of `name` (KeyError: not a Riverlog metric)."""
    return CATALOG[name]


def family_of(series: str) -> str | None:
    """The catalog family a served sample name belongs to (`riverlog_x_total` → `riverlog_x`),
    None when it is not one of ours."""
    for spec_ in CATALOG.values():
        if series == spec_.name or series in spec_.series_names:
            return spec_.name
    return None
