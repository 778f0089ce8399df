"""The console's form parsing (Kafka's codes for bad input, nothing sent), where the message
browser starts reading, and the ACL table rows read from bindings by attribute."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.console.browse import start_offset
from riverlog.console.forms import (
    acl_binding,
    acl_rows,
    config_lines,
    quota_value,
    timestamp_ms,
    whole_number,
)
from riverlog.console.web import number


def test_whole_number_checks_bounds_and_names_the_field() -> None:
    assert whole_number("partitions", " 3 ", lo=1) == 3
    assert whole_number("partitions", "", default=-1) == -1
    with pytest.raises(RiverlogError) as info:
        whole_number("partitions", "0", lo=1, code=ErrorCode.INVALID_PARTITIONS)
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    assert "partitions must be at least 1, not 0" in info.value.message
    with pytest.raises(RiverlogError, match="whole number, not 'two'"):
        whole_number("partitions", "two")
    with pytest.raises(RiverlogError, match="offset is required"):
        whole_number("offset", " ")


def test_config_lines_are_properties() -> None:
    text = "# retention\nretention.ms = 1000\n\ncleanup.policy=compact,delete\nempty="
    assert config_lines(text) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
        "empty": "",
    }
    with pytest.raises(RiverlogError) as info:
        config_lines("retention.ms=1\ncleanup.policy")
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "line 2 'cleanup.policy' is not name=value" in info.value.message


def test_timestamps_are_milliseconds_or_iso_dates_utc_by_default() -> None:
    assert timestamp_ms("1700000000000") == 1_700_000_000_000
    assert timestamp_ms("1970-01-01T00:00:01") == 1000
    assert timestamp_ms("1970-01-01T01:00:00+01:00") == 0
    assert timestamp_ms("2026-11-25T09:30") == 1_795_599_000_000
    for bad in ("yesterday", "-5", "1969-12-31T23:59:59"):
        with pytest.raises(RiverlogError) as info:
            timestamp_ms(bad)
        assert info.value.code == ErrorCode.INVALID_TIMESTAMP


def test_numbers_are_shown_whole_with_separators() -> None:
    assert number(1048576.0) == "1,048,576"
    assert number(50.0) == "50"
    assert number(0.25) == "0.25"


def test_quota_values_empty_removes() -> None:
    assert quota_value("1e6") == 1_000_000.0
    assert quota_value(" ") is None
    with pytest.raises(RiverlogError, match="'fast' is not a number"):
        quota_value("fast")


def test_browse_starts_at_the_newest_records_or_the_offset_clamped_to_the_log() -> None:
    assert start_offset(0, 100, None, 20) == 80
    assert start_offset(90, 100, None, 20) == 90
    assert start_offset(10, 100, 5, 20) == 10
    assert start_offset(10, 100, 50, 20) == 50
    assert start_offset(10, 100, 500, 20) == 100


class _Op(enum.IntEnum):
    READ = 3


@dataclass(frozen=True)
class _Pattern:
    resource_type: str
    name: str
    pattern_type: str


@dataclass(frozen=True)
class _Entry:
    principal: str
    host: str
    operation: _Op
    permission: str


@dataclass(frozen=True)
class _Binding:
    pattern: _Pattern
    entry: _Entry


def test_acl_rows_read_kafka_shaped_bindings_and_show_anything_else_whole() -> None:
    binding = _Binding(
        _Pattern("TOPIC", "orders-", "PREFIXED"), _Entry("User:bob", "*", _Op.READ, "ALLOW")
    )
    assert acl_rows([binding, "odd"]) == [
        {
            "resource_type": "TOPIC",
            "pattern_type": "PREFIXED",
            "resource": "orders-",
            "principal": "User:bob",
            "host": "*",
            "operation": "READ",
            "permission": "ALLOW",
        },
        {"binding": "odd"},
    ]


def test_the_acl_form_becomes_a_checked_binding_with_kafka_acls_defaults() -> None:
    binding = acl_binding("bob", "", "allow", "read", "topic", "prefixed", "orders-")
    assert str(binding) == "(TOPIC:PREFIXED:orders-) ALLOW User:bob from * to READ"
    cluster = acl_binding("User:*", "10.0.0.1", "DENY", "ALTER", "CLUSTER", "LITERAL", "")
    assert cluster.pattern.name == "kafka-cluster"  # the one cluster resource
    assert cluster.entry.host == "10.0.0.1"
    for args, expected in [
        (("bob", "*", "ALLOW", "READ", "TOPIC", "MATCH", "x"), "pattern type must be one of"),
        (("bob", "*", "ALLOW", "ANY", "TOPIC", "LITERAL", "x"), "operation must be one of"),
        (("bob", "*", "MAYBE", "READ", "TOPIC", "LITERAL", "x"), "permission must be one of"),
        (("bob", "*", "ALLOW", "READ", "TOPIC", "LITERAL", ""), "needs a resource name"),
        (("Group:x", "*", "ALLOW", "READ", "TOPIC", "LITERAL", "x"), "invalid principal"),
        (("", "*", "ALLOW", "READ", "TOPIC", "LITERAL", "x"), "invalid principal"),
        (("bob", "*", "ALLOW", "READ", "TOPIC", "PREFIXED", "*"), "wildcard name * is LITERAL"),
    ]:
        with pytest.raises(RiverlogError) as info:
            acl_binding(*args)
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert expected in info.value.message, args
