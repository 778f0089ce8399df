"""Which quota applies to a connection, with Kafka's order of precedence, and who shares it.

Kafka's `DefaultQuotaCallback` answers two questions and this module answers the same two, the
same way: for a connection's (user principal, client-id), which configured entry applies
(`quotaMetricTags`: the first of the eight levels that configures this quota kind), and, for a
metric entity, what its bound is (`quotaLimit`). The second matters because the quota service
sees only metric entities in the usage gateways report, never connections; the two answers are
consistent by construction (`bound_for(resolve(...).entity) == resolve(...).bound`).

Sharing follows Kafka's metric tags: a level that names a user keeps the user in the group, a
level that names a client-id (or `<default>` client-id) keeps the client-id. So
`/config/users/alice` is shared by all of alice's clients, `/config/users/<default>` gives every
user their own window, and `/config/clients/<default>` gives every client-id one window shared
across users. Levels are looked up per quota kind: an entry that sets only consumer_byte_rate
does not hide a producer_byte_rate set at a lower level.

One deliberate difference: Kafka writes "" for an absent tag, so a client that sends an empty
client-id escapes `<default>` client-id quotas (its tags read "no client-id part" and nothing
matches). Here an empty or missing client-id is a client-id like any other for the `<default>`
levels (never for named ones), and the metric entity keeps it apart from user-level groups.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .entity import (
    ANONYMOUS,
    DEFAULT,
    ConfigLevel,
    MetricEntity,
    QuotaEntity,
    QuotaType,
    parse_quota_configs,
)

_USER_LEVELS: Final = frozenset({ConfigLevel.USER, ConfigLevel.DEFAULT_USER})
_CLIENT_LEVELS: Final = frozenset({ConfigLevel.CLIENT, ConfigLevel.DEFAULT_CLIENT})


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The answer for one connection and quota kind: the group it is measured in, the config
    entry that set the bound, and the bound (bytes/s, or percent of one thread)."""

    quota_type: QuotaType
    entity: MetricEntity
    config: QuotaEntity
    bound: float

    @property
    def level(self) -> ConfigLevel:
        return self.config.level


def _candidates(user: str, client_id: str) -> Iterator[QuotaEntity]:
    """The config entries that may apply to (user, client_id), most specific first."""
    if client_id:
        yield QuotaEntity(user, client_id)
    yield QuotaEntity(user, DEFAULT)
    yield QuotaEntity(user, None)
    if client_id:
        yield QuotaEntity(DEFAULT, client_id)
    yield QuotaEntity(DEFAULT, DEFAULT)
    yield QuotaEntity(DEFAULT, None)
    if client_id:
        yield QuotaEntity(None, client_id)
    yield QuotaEntity(None, DEFAULT)


def metric_entity_for(level: ConfigLevel, user: str, client_id: str) -> MetricEntity:
    """Kafka's metric tags for a connection whose quota comes from `level`."""
    if level in _USER_LEVELS:
        return MetricEntity(user, None)
    if level in _CLIENT_LEVELS:
        return MetricEntity(None, client_id)
    return MetricEntity(user, client_id)


class QuotaResolver:
    """An immutable snapshot of the configured quotas that answers precedence questions.

    Lifecycle: built from the stored configs at start-up and again on every change the config
    watch delivers (`from_paths`); holders swap the whole object, so a reader never sees half an
    update. Any thread or task may call it. `resolve` costs at most eight dict look-ups.
    """

    def __init__(self, quotas: Mapping[QuotaEntity, Mapping[QuotaType, float]] | None = None):
        frozen = {entity: dict(values) for entity, values in (quotas or {}).items() if values}
        self._quotas: Mapping[QuotaEntity, Mapping[QuotaType, float]] = MappingProxyType(frozen)
        self._enabled = frozenset(t for values in frozen.values() for t in values)

    @classmethod
    def from_paths(cls, configs: Mapping[str, Mapping[str, object]]) -> QuotaResolver:
        """Validate `{config path: {key: value}}` and build a resolver; RiverlogError naming
        the path, key or value otherwise."""
        return cls(parse_quota_configs(configs))

    @property
    def quotas(self) -> Mapping[QuotaEntity, Mapping[QuotaType, float]]:
        return self._quotas

    def enabled(self, quota_type: QuotaType) -> bool:
        """Whether any entry sets this kind (Kafka's `quotasEnabled`): when not, callers skip
        accounting altogether."""
        return quota_type in self._enabled

    def quota_of(self, entity: QuotaEntity, quota_type: QuotaType) -> float | None:
        return self._quotas.get(entity, {}).get(quota_type)

    def resolve(
        self, quota_type: QuotaType, user: str | None, client_id: str | None
    ) -> ResolvedQuota | None:
        """The quota of `quota_type` that applies to a connection, or None when no level sets
        one (unlimited). `user` None (or "") is the ANONYMOUS principal; `client_id` None is
        "". A principal or client-id literally named `<default>` is treated as the default,
        which is harmless (it gets what any unnamed one gets)."""
        if quota_type not in self._enabled:
            return None
        principal = _principal(user)
        client = client_id or ""
        for config in _candidates(principal, client):
            bound = self._quotas.get(config, {}).get(quota_type)
            if bound is not None:
                entity = metric_entity_for(config.level, principal, client)
                return ResolvedQuota(quota_type, entity, config, bound)
        return None

    def bound_for(self, quota_type: QuotaType, entity: MetricEntity) -> float | None:
        """The bound of a metric entity (Kafka's `quotaLimit(metricTags)`): only the levels
        that keep the same tags are looked at, so the answer is the one `resolve` gave."""
        if quota_type not in self._enabled:
            return None
        user, client = entity.user, entity.client_id
        if user is not None and client is not None:
            entries = [QuotaEntity(user, client)] if client else []
            entries.append(QuotaEntity(user, DEFAULT))
            if client:
                entries.append(QuotaEntity(DEFAULT, client))
            entries.append(QuotaEntity(DEFAULT, DEFAULT))
        elif user is not None:
            entries = [QuotaEntity(user, None), QuotaEntity(DEFAULT, None)]
        else:
            assert client is not None  # MetricEntity has at least one part
            entries = [QuotaEntity(None, client)] if client else []
            entries.append(QuotaEntity(None, DEFAULT))
        for config in entries:
            bound = self._quotas.get(config, {}).get(quota_type)
            if bound is not None:
                return bound
        return None

    def __len__(self) -> int:
        return len(self._quotas)

    def __repr__(self) -> str:
        return f"QuotaResolver({len(self._quotas)} entities)"


def _principal(user: str | None) -> str:
    return user or ANONYMOUS
