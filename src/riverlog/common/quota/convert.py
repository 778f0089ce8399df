"""Converters between the quota domain and its protos (admin, metadata and quota.proto).

The domain modules of this package stay free of grpc and `_pb2`; this module is their adapter,
shared by the metadata service (which stores and publishes configs and users), the gateways
and quota instances (which follow them and exchange usage) and the CLI and SDK (which build
the admin requests). An entity on the wire is Kafka's list of (entity_type, name) components,
an absent name standing for `<default>`; a hold crosses processes as its remaining time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2, metadata_pb2, quota_pb2

from .credentials import StoredCredential
from .entity import DEFAULT, MetricEntity, QuotaEntity, QuotaType
from .exchange import Allowance, QuotaAnswer, UsageDelta, UsageReport
from .handover import EntityWindow, WindowHandover
from .manager import ThrottleState
from .resolver import QuotaResolver
from .window import SampleState

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)


def entity_to_proto(entity: QuotaEntity) -> admin_pb2.ClientQuotaEntity:
    out = admin_pb2.ClientQuotaEntity()
    for entity_type, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        if name is None:
            continue
        component = out.components.add(entity_type=entity_type)
        if name != DEFAULT:
            component.name = name
    return out


def entity_from_proto(msg: admin_pb2.ClientQuotaEntity) -> QuotaEntity:
    """The config entity; RiverlogError(INVALID_REQUEST) for an unknown or repeated type."""
    names: dict[str, str] = {}
    for component in msg.components:
        if component.entity_type not in ENTITY_TYPES:
            raise RiverlogError(
                f"unknown quota entity type {component.entity_type!r}: expected"
                f" {' or '.join(ENTITY_TYPES)}",
                ErrorCode.INVALID_REQUEST,
            )
        if component.entity_type in names:
            raise RiverlogError(
                f"quota entity type {component.entity_type!r} given twice",
                ErrorCode.INVALID_REQUEST,
            )
        names[component.entity_type] = component.name if component.HasField("name") else DEFAULT
    return QuotaEntity(names.get(USER), names.get(CLIENT_ID))


def entity_label(msg: admin_pb2.ClientQuotaEntity) -> str:
    """`user=alice,client-id=<default>` for messages and the CLI."""
    parts = [f"{c.entity_type}={c.name if c.HasField('name') else DEFAULT}" for c in msg.components]
    return ",".join(parts) or "(no entity)"


def metric_entity_to_proto(entity: MetricEntity) -> quota_pb2.QuotaMetricEntity:
    out = quota_pb2.QuotaMetricEntity()
    if entity.user is not None:
        out.user = entity.user
    if entity.client_id is not None:
        out.client_id = entity.client_id
    return out


def metric_entity_from_proto(msg: quota_pb2.QuotaMetricEntity) -> MetricEntity:
    return MetricEntity(
        msg.user if msg.HasField("user") else None,
        msg.client_id if msg.HasField("client_id") else None,
    )


def report_to_proto(report: UsageReport) -> quota_pb2.ReportUsageRequest:
    return quota_pb2.ReportUsageRequest(
        gateway_id=report.gateway_id,
        seq=report.seq,
        interval_ms=report.interval_ms,
        deltas=[
            quota_pb2.QuotaUsageDelta(
                quota_type=d.quota_type.key,
                entity=metric_entity_to_proto(d.entity),
                value=d.value,
            )
            for d in report.deltas
        ],
    )


def report_from_proto(msg: quota_pb2.ReportUsageRequest) -> UsageReport:
    """RiverlogError(INVALID_REQUEST) for an unknown quota kind or an empty entity."""
    try:
        deltas = tuple(
            UsageDelta(QuotaType(d.quota_type), metric_entity_from_proto(d.entity), d.value)
            for d in msg.deltas
        )
    except ValueError as exc:
        raise RiverlogError(f"bad usage report: {exc}", ErrorCode.INVALID_REQUEST) from None
    return UsageReport(msg.gateway_id, msg.seq, deltas, msg.interval_ms or 100)


def answer_to_proto(answer: QuotaAnswer, now_ms: int) -> quota_pb2.ReportUsageResponse:
    return quota_pb2.ReportUsageResponse(
        holds=[
            quota_pb2.QuotaHold(
                quota_type=h.quota_type.key,
                entity=metric_entity_to_proto(h.entity),
                remaining_ms=h.remaining_ms(now_ms),
            )
            for h in answer.holds
            if h.remaining_ms(now_ms) > 0
        ],
        allowances=[
            quota_pb2.QuotaAllowance(
                quota_type=a.quota_type.key,
                entity=metric_entity_to_proto(a.entity),
                value=a.value,
            )
            for a in answer.allowances
        ],
    )


def answer_from_proto(msg: quota_pb2.ReportUsageResponse, now_ms: int) -> QuotaAnswer:
    """Holds rebuilt on the receiver's clock (`now_ms` + remaining); unknown kinds skipped."""
    known = {t.key: t for t in QuotaType}
    holds = tuple(
        ThrottleState(
            known[h.quota_type], metric_entity_from_proto(h.entity), now_ms + h.remaining_ms
        )
        for h in msg.holds
        if h.quota_type in known
    )
    allowances = tuple(
        Allowance(known[a.quota_type], metric_entity_from_proto(a.entity), a.value)
        for a in msg.allowances
        if a.quota_type in known
    )
    return QuotaAnswer(holds, allowances)


def handover_to_proto(handover: WindowHandover) -> quota_pb2.HandOverWindowsRequest:
    return quota_pb2.HandOverWindowsRequest(
        from_node_id=handover.from_node_id,
        leaving=handover.leaving,
        from_incarnation=handover.from_incarnation,
        windows=[
            quota_pb2.QuotaEntityWindow(
                quota_type=w.quota_type.key,
                entity=metric_entity_to_proto(w.entity),
                samples=[
                    quota_pb2.QuotaWindowSample(
                        start_age_ms=s.start_age_ms,
                        last_event_age_ms=s.last_event_age_ms,
                        value=s.value,
                        event_count=s.event_count,
                    )
                    for s in w.samples
                ],
                throttle_remaining_ms=w.throttle_ms,
            )
            for w in handover.windows
        ],
    )


def handover_from_proto(msg: quota_pb2.HandOverWindowsRequest) -> WindowHandover:
    """RiverlogError(INVALID_REQUEST) for an unknown quota kind, an empty entity or a sample
    from the future."""
    try:
        windows = tuple(
            EntityWindow(
                QuotaType(w.quota_type),
                metric_entity_from_proto(w.entity),
                tuple(
                    SampleState(s.start_age_ms, s.last_event_age_ms, s.value, s.event_count)
                    for s in w.samples
                ),
                max(w.throttle_remaining_ms, 0),
            )
            for w in msg.windows
        )
    except ValueError as exc:
        raise RiverlogError(f"bad window handover: {exc}", ErrorCode.INVALID_REQUEST) from None
    for window in windows:
        for sample in window.samples:
            if sample.start_age_ms < sample.last_event_age_ms or sample.last_event_age_ms < 0:
                raise RiverlogError(
                    f"bad window handover: sample of {window.entity} ends before it starts"
                    " or in the future",
                    ErrorCode.INVALID_REQUEST,
                )
    return WindowHandover(msg.from_node_id, windows, msg.leaving, msg.from_incarnation)


def credential_to_proto(credential: StoredCredential) -> metadata_pb2.StoredUser:
    return metadata_pb2.StoredUser(
        name=credential.name,
        mechanism=credential.mechanism,
        iterations=credential.iterations,
        salt=credential.salt,
        hash=credential.hash,
    )


def credential_from_proto(msg: metadata_pb2.StoredUser) -> StoredCredential:
    return StoredCredential(msg.name, msg.mechanism, msg.iterations, msg.salt, msg.hash)


def image_to_proto(
    version: int,
    configs: Mapping[QuotaEntity, Mapping[QuotaType, float]],
    users: Iterable[StoredCredential],
) -> metadata_pb2.ClientQuotaImage:
    return metadata_pb2.ClientQuotaImage(
        version=version,
        configs=[
            metadata_pb2.QuotaConfigEntry(
                path=entity.path, values={t.key: v for t, v in values.items()}
            )
            for entity, values in sorted(configs.items(), key=lambda kv: kv[0].path)
        ],
        users=[credential_to_proto(u) for u in sorted(users, key=lambda u: u.name)],
    )


def image_from_proto(
    msg: metadata_pb2.ClientQuotaImage,
) -> tuple[QuotaResolver, dict[str, StoredCredential]]:
    """The resolver and the users of a published image (validated again on the way in)."""
    resolver = QuotaResolver.from_paths({c.path: dict(c.values) for c in msg.configs})
    users = {u.name: credential_from_proto(u) for u in msg.users}
    return resolver, users
