"""What the console's forms send, parsed and checked before any call is made: bad input is a
RiverlogError with Kafka's code (INVALID_REQUEST, INVALID_PARTITIONS, INVALID_CONFIG, ...) and
a message naming the field, and nothing is sent to the cluster. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from riverlog.common.acl.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from riverlog.common.errors import ErrorCode, RiverlogError

ACL_RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
ACL_PATTERN_TYPES = ("LITERAL", "PREFIXED")
ACL_OPERATIONS = tuple(op.name for op in AclOperation if op is not AclOperation.ANY)
ACL_PERMISSIONS = ("ALLOW", "DENY")


def whole_number(
    field: str,
    text: str,
    *,
    lo: int | None = None,
    default: int | None = None,
    code: ErrorCode = ErrorCode.INVALID_REQUEST,
) -> int:
    """`text` as an integer at least `lo`; empty text is `default` (an error if None)."""
    text = text.strip()
    if not text:
        if default is None:
            raise RiverlogError(f"{field} is required", code)
        return default
    try:
        value = int(text)
    except ValueError:
        raise RiverlogError(f"{field} must be a whole number, not {text!r}", code) from None
    if lo is not None and value < lo:
        raise RiverlogError(f"{field} must be at least {lo}, not {value}", code)
    return value


def config_lines(text: str) -> dict[str, str]:
    """`name=value` per line (blank lines and `#` comments skipped), as a properties file."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise RiverlogError(
                f"config line {number} {line!r} is not name=value", ErrorCode.INVALID_CONFIG
            )
        out[name.strip()] = value.strip()
    return out


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (UTC unless it names its
    zone; a browser's datetime-local input sends `2026-11-25T09:30`)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        value = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise RiverlogError(
                f"timestamp {text!r} is neither milliseconds since the epoch nor an ISO 8601 "
                "date and time",
                ErrorCode.INVALID_TIMESTAMP,
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = int(moment.timestamp() * 1000)
    if value < 0:
        raise RiverlogError(f"timestamp {text!r} is before 1970", ErrorCode.INVALID_TIMESTAMP)
    return value


def quota_value(text: str) -> float | None:
    """A quota's value; empty removes the key (None)."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise RiverlogError(
            f"quota value {text!r} is not a number", ErrorCode.INVALID_CONFIG
        ) from None


def acl_rows(bindings: Iterable[Any]) -> list[dict[str, str]]:
    """Table rows of ACL bindings, read by attribute (Kafka's AclBinding: `pattern` with
    resource_type / name / pattern_type, `entry` with principal / host / operation /
    permission); a value of another shape is shown whole, so the page never breaks on it."""

    def name(value: Any) -> str:
        return str(getattr(value, "name", value))

    rows = []
    for binding in bindings:
        pattern, entry = getattr(binding, "pattern", None), getattr(binding, "entry", None)
        if pattern is None or entry is None:
            rows.append({"binding": str(binding)})
            continue
        rows.append(
            {
                "resource_type": name(pattern.resource_type),
                "pattern_type": name(pattern.pattern_type),
                "resource": str(pattern.name),
                "principal": str(entry.principal),
                "host": str(entry.host),
                "operation": name(entry.operation),
                "permission": name(entry.permission),
            }
        )
    return rows


def _choice(field: str, value: str, choices: tuple[str, ...]) -> str:
    value = value.strip().upper()
    if value not in choices:
        raise RiverlogError(
            f"{field} must be one of {', '.join(choices)}, not {value!r}", ErrorCode.INVALID_REQUEST
        )
    return value


def acl_binding(
    principal: str,
    host: str,
    permission: str,
    operation: str,
    resource_type: str,
    pattern_type: str,
    resource: str,
) -> AclBinding:
    """A binding from the ACL form, checked as CreateAcls checks it (kafka-acls.sh's
    defaults: host `*`; the cluster resource needs no name). A bare user name is taken as
    `User:<name>`."""
    principal = principal.strip()
    if principal and ":" not in principal:
        principal = f"User:{principal}"
    kind = ResourceType[_choice("resource type", resource_type, ACL_RESOURCE_TYPES)]
    name = resource.strip() or (CLUSTER_NAME if kind is ResourceType.CLUSTER else "")
    binding = AclBinding(
        ResourcePattern(
            kind, name, PatternType[_choice("pattern type", pattern_type, ACL_PATTERN_TYPES)]
        ),
        AccessControlEntry(
            principal,
            host.strip() or "*",
            AclOperation[_choice("operation", operation, ACL_OPERATIONS)],
            AclPermission[_choice("permission", permission, ACL_PERMISSIONS)],
        ),
    )
    validate_binding(binding)
    return binding
