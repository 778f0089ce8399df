"""`riverlog partitions reassign` as a user runs it (the real command in a subprocess): generate a
plan, execute it and wait, verify, list, and the refusals (a dead node, a cancel with nothing
moving) as one line on stderr with exit status 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reassign_harness import ReassignHarness

from riverlog.client import TopicPartition
from riverlog.common.errors import ErrorCode, RiverlogError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def riverlog(harness: ReassignHarness, *args: str) -> subprocess.CompletedProcess[str]:
    """`riverlog partitions reassign ARGS` against the harness's gateway."""
    command = [sys.executable, "-m", "riverlog.cli.main", "partitions", "reassign", *args]
    command += ["--bootstrap", harness.cluster.gateway_address]
    return subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)


def test_generate_execute_verify_list(harness: ReassignHarness, tmp_path: Path) -> None:
    topic = harness.create_topic("cli")
    harness.place(topic, (1, 2, 3))
    generated = riverlog(harness, "--generate", "--topics", topic, "--nodes", "2,3,4", "--json")
    assert generated.returncode == 0, generated.stderr
    proposed = json.loads(generated.stdout)["proposed"]
    [entry] = proposed["partitions"]
    assert (entry["topic"], entry["partition"], sorted(entry["replicas"])) == (topic, 0, [2, 3, 4])

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    # --wait ends before the subprocess timeout, so a move that never completes fails with the
    # command's progress lines (new replica in sync or not) and the partition's state.
    executed = riverlog(
        harness, "--plan", str(plan), "--execute", "--wait", "--wait-timeout", "120", "--json"
    )
    assert executed.returncode == 0, (executed.stderr, harness.state(topic))
    document = json.loads(executed.stdout)
    assert document["started"] == [{"topic": topic, "partition": 0}]
    assert document["rollback"]["partitions"][0]["replicas"] == [1, 2, 3]
    assert harness.state(topic).replicas == tuple(entry["replicas"])

    verified = riverlog(harness, "--plan", str(plan), "--verify")
    assert verified.returncode == 0, verified.stderr
    assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout

    listed = riverlog(harness, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert all(p["topic"] != topic for p in json.loads(listed.stdout)["partitions"])

    cancelled = riverlog(harness, "--plan", str(plan), "--cancel")
    assert cancelled.returncode == 1
    assert "NO_REASSIGNMENT_IN_PROGRESS" in cancelled.stderr


def test_refused_plan(harness: ReassignHarness, tmp_path: Path) -> None:
    topic = harness.create_topic("cli-refused")
    before = harness.state(topic)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 99]}]}
        )
    )
    refused = riverlog(harness, "--plan", str(plan), "--execute")
    assert refused.returncode == 1
    assert "INVALID_REPLICA_ASSIGNMENT" in refused.stderr and "99" in refused.stderr
    assert harness.state(topic) == before
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = riverlog(harness, "--plan", str(bad), "--execute")
    assert broken.returncode == 1 and "not JSON" in broken.stderr


def test_list_of_an_unknown_topic_or_partition_is_an_error(
    harness: ReassignHarness, tmp_path: Path
) -> None:
    topic = harness.create_topic("cli-list-unknown")
    plan = tmp_path / "unknown.json"
    partitions = [{"topic": topic, "partition": 7, "replicas": [1]}]
    partitions.append({"topic": "no-such-topic", "partition": 0, "replicas": [1]})
    plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
    listed = riverlog(harness, "--list", "--plan", str(plan))
    assert listed.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in listed.stderr
    assert f"{topic}-7" in listed.stderr and "no-such-topic-0" in listed.stderr
    by_topic = riverlog(harness, "--list", "--topics", "no-such-topic")
    assert by_topic.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in by_topic.stderr
    known = riverlog(harness, "--list", "--topics", topic, "--json")  # known, not moving
    assert known.returncode == 0 and json.loads(known.stdout) == {"partitions": []}


def test_admin_client_list_of_an_unknown_partition_raises_kafkas_error(
    harness: ReassignHarness,
) -> None:
    topic = harness.create_topic("sdk-list-unknown")
    with pytest.raises(RiverlogError) as info:
        harness.admin.list_partition_reassignments([TopicPartition(topic, 3)])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert f"{topic}-3" in info.value.message
    assert harness.admin.list_partition_reassignments([TopicPartition(topic, 0)]) == {}
