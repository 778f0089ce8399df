"""`riverlog topics ...` against the session cluster: create, list, describe (text and JSON),
alter, delete, and one-line errors with exit status 1 for what the cluster refuses."""

from __future__ import annotations

import json

import pytest

from riverlog.client import AdminClient, RiverlogError
from riverlog.common.errors import ErrorCode

pytestmark = pytest.mark.integration


def describe_json(riverlog, name: str) -> dict:
    done = riverlog("topics", "describe", name, "--json")
    assert done.returncode == 0, done.stderr
    documents = json.loads(done.stdout)
    assert [d["name"] for d in documents] == [name]
    return documents[0]


def test_create_list_describe_alter_delete(riverlog, topic_name: str) -> None:
    done = riverlog(
        "topics", "create", topic_name, "--partitions", "3", "--replication-factor", "2",
        "--config", "retention.ms=3600000", "--client-id", "cli-test",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"Created topic {topic_name}." in done.stderr

    listed = riverlog("topics", "list", "--json")
    assert listed.returncode == 0 and topic_name in json.loads(listed.stdout)
    assert topic_name in riverlog("topics", "list").stdout.splitlines()

    topic = describe_json(riverlog, topic_name)
    assert topic["partition_count"] == 3 and topic["replication_factor"] == 2
    assert topic["configs"] == {"retention.ms": "3600000"}
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert len(p["replicas"]) == 2 and len(set(p["replicas"])) == 2
        assert p["leader"] in p["replicas"]
        assert set(p["isr"]) <= set(p["replicas"]) and p["leader"] in p["isr"]

    text = riverlog("topics", "describe", topic_name)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic_name}\tTopicId: {topic['topic_id']}")
    assert "PartitionCount: 3\tReplicationFactor: 2\tConfigs: retention.ms=3600000" in lines[0]
    assert len(lines) == 4 and all(line.startswith(f"\tTopic: {topic_name}") for line in lines[1:])

    done = riverlog(
        "topics", "alter", topic_name, "--config", "cleanup.policy=compact",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert describe_json(riverlog, topic_name)["configs"] == {"cleanup.policy": "compact"}
    every = riverlog("topics", "describe", topic_name, "--json", "--all-configs")
    configs = json.loads(every.stdout)[0]["configs"]
    assert configs["cleanup.policy"] == "compact" and "segment.bytes" in configs

    done = riverlog("topics", "delete", topic_name)
    assert done.returncode == 0, done.stderr
    assert topic_name not in json.loads(riverlog("topics", "list", "--json").stdout)


def test_create_refusals(riverlog, new_topic, topic_name: str, expect_error) -> None:
    existing = new_topic()
    expect_error(riverlog("topics", "create", existing), "TOPIC_ALREADY_EXISTS")
    done = riverlog("topics", "create", existing, "--if-not-exists")
    assert done.returncode == 0, done.stderr

    expect_error(
        riverlog("topics", "create", topic_name, "--config", "retention.ms=soon"),
        "INVALID_CONFIG",
        "retention.ms",
    )
    expect_error(
        riverlog("topics", "create", topic_name, "--config", "no.such.config=1"),
        "INVALID_CONFIG",
    )
    expect_error(
        riverlog("topics", "create", topic_name, "--replication-factor", "9"),
        "INVALID_REPLICATION_FACTOR",
    )
    # Nothing was created by the refused requests.
    assert topic_name not in json.loads(riverlog("topics", "list", "--json").stdout)


def test_unknown_topics(riverlog, topic_name: str, expect_error) -> None:
    expect_error(riverlog("topics", "describe", topic_name), "UNKNOWN_TOPIC_OR_PARTITION")
    expect_error(riverlog("topics", "delete", topic_name), "UNKNOWN_TOPIC_OR_PARTITION")
    assert riverlog("topics", "delete", topic_name, "--if-exists").returncode == 0
    expect_error(
        riverlog("topics", "alter", topic_name, "--config", "retention.ms=1"),
        "UNKNOWN_TOPIC_OR_PARTITION",
    )


def test_alter_refuses_a_bad_value_and_keeps_the_old_one(riverlog, new_topic, expect_error) -> None:
    name = new_topic(configs={"retention.ms": "60000"})
    expect_error(riverlog("topics", "alter", name, "--config", "retention.ms=-7"), "INVALID_CONFIG")
    assert describe_json(riverlog, name)["configs"] == {"retention.ms": "60000"}


def test_a_compacted_topic_cannot_be_tiered(
    riverlog, new_topic, topic_name, expect_error, gateway_address
) -> None:
    """Kafka's rule: remote.storage.enable=true only with cleanup.policy=delete. Refused with
    INVALID_CONFIG on create and on alter (the command, and the SDK), whichever of the two comes
    second; nothing changes (checked through the SDK: cheaper than more commands)."""
    refused = "remote.storage.enable=true is not allowed with cleanup.policy=compact"
    both = ("--config", "remote.storage.enable=true", "--config", "cleanup.policy=compact")
    expect_error(riverlog("topics", "create", topic_name, *both), "INVALID_CONFIG", refused)

    tiered = new_topic(configs={"remote.storage.enable": "true"})
    compacted = new_topic(configs={"cleanup.policy": "compact"})
    change = "cleanup.policy=compact"
    expect_error(riverlog("topics", "alter", tiered, "--config", change), "INVALID_CONFIG", refused)
    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        outcome = admin.alter_configs(
            {compacted: {"remote.storage.enable": "true"}}, raise_on_error=False
        )[compacted]  # the same through the SDK (IncrementalAlterConfigs)
        assert isinstance(outcome, RiverlogError) and outcome.code is ErrorCode.INVALID_CONFIG
        assert refused in outcome.message
        assert topic_name not in admin.list_topics()
        configs = admin.describe_configs([tiered, compacted])
    overridden = {
        name: {k: e.value for k, e in entries.items() if not e.is_default}
        for name, entries in configs.items()
    }
    assert overridden == {
        tiered: {"remote.storage.enable": "true"},
        compacted: {"cleanup.policy": "compact"},
    }


def test_alter_grows_partitions(riverlog, new_topic) -> None:
    name = new_topic(partitions=1)
    done = riverlog("topics", "alter", name, "--partitions", "3")
    assert done.returncode == 0, done.stderr
    assert describe_json(riverlog, name)["partition_count"] == 3


def test_unreachable_gateway_is_one_line(riverlog, expect_error) -> None:
    from riverlog.cluster import free_port

    done = riverlog("topics", "list", bootstrap=f"127.0.0.1:{free_port()}")
    expect_error(done)
