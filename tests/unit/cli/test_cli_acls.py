"""`riverlog acls` parsing: kafka-acls.sh's options into bindings (principals by hosts by
operations by resources, --producer / --consumer conveniences, pattern types) and usage errors."""

from __future__ import annotations

import pytest

from riverlog.cli.commands.acls import bindings, resources
from riverlog.cli.console import CliError
from riverlog.cli.main import build_parser
from riverlog.common.acl.model import AclOperation, AclPermission, PatternType, ResourceType


def parse(*argv: str):
    return build_parser().parse_args(["acls", *argv])


def test_principals_hosts_operations_and_topics_multiply() -> None:
    args = parse(
        "add",
        "--allow-principal", "User:alice",
        "--allow-principal", "User:bob",
        "--allow-host", "10.0.0.1",
        "--operation", "Read",
        "--operation", "describe_configs",
        "--topic", "orders",
    )  # fmt: skip
    found = bindings(args)
    assert len(found) == 4
    assert {b.entry.principal for b in found} == {"User:alice", "User:bob"}
    assert {b.entry.operation for b in found} == {
        AclOperation.READ,
        AclOperation.DESCRIBE_CONFIGS,
    }
    assert {b.entry.host for b in found} == {"10.0.0.1"}
    assert {b.pattern.pattern_type for b in found} == {PatternType.LITERAL}


def test_deny_principal_and_default_operation_all() -> None:
    found = bindings(parse("add", "--deny-principal", "User:*", "--group", "g"))
    assert len(found) == 1
    b = found[0]
    assert (b.entry.permission, b.entry.operation, b.entry.host) == (
        AclPermission.DENY,
        AclOperation.ALL,
        "*",
    )
    assert b.pattern.resource_type == ResourceType.GROUP


def test_producer_convenience_with_idempotent_and_transactional_id() -> None:
    args = parse(
        "add", "--allow-principal", "User:p", "--producer", "--idempotent",
        "--topic", "logs-", "--resource-pattern-type", "prefixed", "--transactional-id", "tx",
    )  # fmt: skip
    found = {(b.pattern.resource_type, b.pattern.name, b.entry.operation) for b in bindings(args)}
    assert found == {
        (ResourceType.TOPIC, "logs-", AclOperation.WRITE),
        (ResourceType.TOPIC, "logs-", AclOperation.DESCRIBE),
        (ResourceType.TOPIC, "logs-", AclOperation.CREATE),
        (ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.DESCRIBE),
        (ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
    }


def test_consumer_convenience_needs_a_group() -> None:
    args = parse("add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    found = {(b.pattern.resource_type, b.entry.operation) for b in bindings(args)}
    assert found == {
        (ResourceType.TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, AclOperation.DESCRIBE),
        (ResourceType.GROUP, AclOperation.READ),
    }
    with pytest.raises(CliError, match="--group"):
        bindings(parse("add", "--allow-principal", "User:c", "--consumer", "--topic", "t"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--allow-principal", "User:a"], "name a resource"),
        (["--topic", "t"], "name a principal"),
        (["--allow-principal", "alice", "--topic", "t"], "User:<name>"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        bindings(parse("add", *argv))


def test_list_defaults_to_any_pattern_and_cluster_is_literal() -> None:
    args = parse("list", "--topic", "t", "--cluster")
    patterns = resources(args, PatternType.ANY)
    assert patterns[0].pattern_type == PatternType.ANY
    assert patterns[1].resource_type == ResourceType.CLUSTER
    assert patterns[1].pattern_type == PatternType.LITERAL


def test_unknown_operation_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse("add", "--operation", "Fly", "--topic", "t")
