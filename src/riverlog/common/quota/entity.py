"""Who a quota is for: config entities at Kafka's eight levels, metric entities, quota kinds.

Two kinds of entity meet in quotas and mixing them up is the classic bug, so each has its own
type. A `QuotaEntity` is where an operator *configures* a quota: a path such as
`/config/users/alice/clients/<default>`, one of Kafka's eight levels (`ConfigLevel`, in order of
precedence). A `MetricEntity` is what usage is *measured* against: Kafka's `quotaMetricTags`,
the (user, client-id) pair in which a part is absent when the matching level does not name it.
All connections with the same metric entity share one window and one quota; the resolver maps a
connection to its metric entity. Values are validated here, once, so a bad quota is refused with
a message naming the path, the key and what is allowed, and changes nothing.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote, unquote

from riverlog.common.errors import ErrorCode, RiverlogError

DEFAULT: Final = "<default>"
"""Kafka's `ConfigEntityName.Default`: the name that stands for "any user" or "any client-id"."""

ANONYMOUS: Final = "ANONYMOUS"
"""The user principal of an unauthenticated connection (Kafka's `KafkaPrincipal.ANONYMOUS`).
It is an ordinary user name for quotas: `/config/users/ANONYMOUS` and the `<default>` user
levels apply to it, nothing else does."""


class QuotaType(enum.Enum):
    """A kind of client quota; the value is its config key (Kafka's `QuotaConfigs`)."""

    PRODUCE = "producer_byte_rate"
    """Bytes per second a (user, client-id) group may produce."""
    FETCH = "consumer_byte_rate"
    """Bytes per second a group may fetch."""
    REQUEST = "request_percentage"
    """Handler time as a percentage of one thread per quota window (Kafka's request quota)."""

    # members are singletons: identity hashing is correct and far cheaper than Enum's
    # hash(self._name_), and these are dict keys on every recorded request
    __hash__ = object.__hash__

    @property
    def key(self) -> str:
        return self.value

    @property
    def is_byte_rate(self) -> bool:
        return self is not QuotaType.REQUEST


QUOTA_KEYS: Final = tuple(sorted(t.key for t in QuotaType))


class ConfigLevel(enum.IntEnum):
    """Kafka's eight quota config levels; a lower value takes precedence."""

    USER_CLIENT = 1
    """/config/users/<user>/clients/<client-id>"""
    USER_DEFAULT_CLIENT = 2
    """/config/users/<user>/clients/<default>"""
    USER = 3
    """/config/users/<user>"""
    DEFAULT_USER_CLIENT = 4
    """/config/users/<default>/clients/<client-id>"""
    DEFAULT_USER_DEFAULT_CLIENT = 5
    """/config/users/<default>/clients/<default>"""
    DEFAULT_USER = 6
    """/config/users/<default>"""
    CLIENT = 7
    """/config/clients/<client-id>"""
    DEFAULT_CLIENT = 8
    """/config/clients/<default>"""


def _invalid_request(message: str) -> RiverlogError:
    return RiverlogError(message, ErrorCode.INVALID_REQUEST)


def _check_name(kind: str, name: str | None) -> None:
    if name is not None and not name:
        raise _invalid_request(f"empty {kind} not supported in a quota entity (use {DEFAULT})")


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """One place a quota is configured: a user (a name or `DEFAULT`), a client-id (a name or
    `DEFAULT`), or both; None means the level does not name that part.

    Names are kept raw; `path` percent-encodes them (Kafka's `Sanitizer`), so a name may hold
    `/` and the literal `<default>` can never be confused with the marker."""

    user: str | None
    client_id: str | None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise _invalid_request("a quota entity names a user, a client-id or both")
        _check_name("user", self.user)
        _check_name("client-id", self.client_id)

    @property
    def level(self) -> ConfigLevel:
        user_default = self.user == DEFAULT
        client_default = self.client_id == DEFAULT
        if self.user is None:
            return ConfigLevel.DEFAULT_CLIENT if client_default else ConfigLevel.CLIENT
        if self.client_id is None:
            return ConfigLevel.DEFAULT_USER if user_default else ConfigLevel.USER
        if user_default:
            if client_default:
                return ConfigLevel.DEFAULT_USER_DEFAULT_CLIENT
            return ConfigLevel.DEFAULT_USER_CLIENT
        return ConfigLevel.USER_DEFAULT_CLIENT if client_default else ConfigLevel.USER_CLIENT

    @property
    def path(self) -> str:
        parts = ["/config"]
        if self.user is not None:
            parts.append(f"users/{_encode(self.user)}")
        if self.client_id is not None:
            parts.append(f"clients/{_encode(self.client_id)}")
        return "/".join(parts)

    @classmethod
    def parse(cls, path: str) -> QuotaEntity:
        """The entity of a config path; RiverlogError(INVALID_REQUEST) for anything that is not
        one of the eight shapes."""
        parts = path.split("/")
        if len(parts) < 4 or parts[0] != "" or parts[1] != "config":
            raise _invalid_request(f"bad quota config path {path!r}: expected {_SHAPES}")
        pairs = parts[2:]
        if len(pairs) == 2 and pairs[0] == "users":
            return cls(_decode(pairs[1], path), None)
        if len(pairs) == 2 and pairs[0] == "clients":
            return cls(None, _decode(pairs[1], path))
        if len(pairs) == 4 and pairs[0] == "users" and pairs[2] == "clients":
            return cls(_decode(pairs[1], path), _decode(pairs[3], path))
        raise _invalid_request(f"bad quota config path {path!r}: expected {_SHAPES}")

    def __str__(self) -> str:
        return self.path


_SHAPES: Final = "/config/users/<user>[/clients/<client-id>] or /config/clients/<client-id>"


def _encode(name: str) -> str:
    return name if name == DEFAULT else quote(name, safe="")


def _decode(segment: str, path: str) -> str:
    if not segment:
        raise _invalid_request(f"bad quota config path {path!r}: empty name")
    if segment == DEFAULT:
        return DEFAULT
    name = unquote(segment)
    if name == DEFAULT:
        raise _invalid_request(f"{DEFAULT!r} is reserved and cannot name a user or client-id")
    return name


@dataclass(frozen=True, slots=True)
class MetricEntity:
    """The group usage is measured against (Kafka's quota metric tags). `user` is None when the
    matching level has no user part (client-id levels); `client_id` is None when it has no
    client-id part (user levels). A present client-id may be "" (a client that sent none)."""

    user: str | None
    client_id: str | None
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise _invalid_request("a metric entity has a user, a client-id or both")
        # a dict key several times per recorded request: hash once
        object.__setattr__(self, "_hash", hash((self.user, self.client_id)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def key(self) -> str:
        """A stable, unambiguous string for logs, metric names and sharding."""
        parts = []
        if self.user is not None:
            parts.append(f"user={quote(self.user, safe='')}")
        if self.client_id is not None:
            parts.append(f"client-id={quote(self.client_id, safe='')}")
        return ",".join(parts)

    def shard(self, num_shards: int) -> int:
        """Which of `num_shards` quota instances owns this entity (same on every process)."""
        if num_shards < 1:
            raise ValueError("num_shards must be at least 1")
        return zlib.crc32(self.key.encode()) % num_shards

    def __str__(self) -> str:
        return self.key


def validate_quota_value(quota_type: QuotaType, value: object, where: str = "") -> float:
    """The value as a float, or RiverlogError(INVALID_CONFIG) saying why not. Byte rates are
    whole positive numbers (Kafka's LONG keys), request_percentage any positive number."""
    at = f" at {where}" if where else ""
    expected = (
        "a whole number of bytes per second above 0"
        if quota_type.is_byte_rate
        else "a percentage above 0"
    )
    number: float
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _invalid_config(quota_type, value, at, expected)
    try:
        number = float(value)
    except ValueError:
        raise _invalid_config(quota_type, value, at, expected) from None
    if not math.isfinite(number) or number <= 0:
        raise _invalid_config(quota_type, value, at, expected)
    if quota_type.is_byte_rate and not number.is_integer():
        raise _invalid_config(quota_type, value, at, expected)
    return number


def _invalid_config(quota_type: QuotaType, value: object, at: str, expected: str) -> RiverlogError:
    return RiverlogError(
        f"invalid value {value!r} for {quota_type.key}{at}: must be {expected}",
        ErrorCode.INVALID_CONFIG,
    )


def validate_quota_values(values: Mapping[str, object], where: str = "") -> dict[QuotaType, float]:
    """Validate one entity's `{key: value}`: unknown keys are RiverlogError(INVALID_REQUEST) as
    in Kafka's AlterClientQuotas, bad values RiverlogError(INVALID_CONFIG)."""
    at = f" at {where}" if where else ""
    out: dict[QuotaType, float] = {}
    for key, value in values.items():
        try:
            quota_type = QuotaType(key)
        except ValueError:
            raise _invalid_request(
                f"unknown quota key {key!r}{at}; known keys: {', '.join(QUOTA_KEYS)}"
            ) from None
        out[quota_type] = validate_quota_value(quota_type, value, where)
    return out


def parse_quota_configs(
    configs: Mapping[str, Mapping[str, object]],
) -> dict[QuotaEntity, dict[QuotaType, float]]:
    """Validate a whole `{config path: {key: value}}` mapping (what the metadata service
    stores); the first bad path, key or value raises and nothing is returned."""
    out: dict[QuotaEntity, dict[QuotaType, float]] = {}
    for path, values in configs.items():
        entity = QuotaEntity.parse(path)
        if entity in out:
            raise _invalid_request(f"quota config path {path!r} repeats {entity.path}")
        validated = validate_quota_values(values, entity.path)
        if validated:
            out[entity] = validated
    return out


def owner_of(entity: MetricEntity, owners: Sequence[int]) -> int:
    """The node id of the quota instance owning `entity` among `owners` (node ids, any
    order); ValueError when there is none."""
    ordered = sorted(owners)
    if not ordered:
        raise ValueError("no quota instance to own the entity")
    owner: int = ordered[entity.shard(len(ordered))]
    return owner
