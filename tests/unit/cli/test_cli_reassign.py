"""`riverlog partitions reassign`: Kafka's JSON plan format parsed and printed, plan generation,
verification, the text/JSON of --list, the argument parsing of the command; and a move in
progress as `topics describe` shows it (Kafka's Adding/Removing Replicas) and on the wire."""

from __future__ import annotations

import json

import pytest

from riverlog.cli.commands.partitions import ongoing_document, ongoing_text, progress_line
from riverlog.cli.commands.reassign_plan import (
    PlanError,
    generate,
    parse_nodes,
    parse_plan,
    plan_document,
    verification_text,
    verify,
)
from riverlog.cli.commands.topics import topic_json, topic_text
from riverlog.cli.main import build_parser
from riverlog.client import PartitionReassignment, TopicDescription, TopicPartition
from riverlog.client.admin import PartitionInfo as AdminPartitionInfo
from riverlog.common.cluster.convert import partition_from_proto, partition_to_proto
from riverlog.common.cluster.image import PartitionInfo

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def test_plan_round_trip():
    plan = {T1: (4, 2), T0: (2, 3, 4)}
    document = plan_document(plan)
    assert document["version"] == 1
    assert [p["partition"] for p in document["partitions"]] == [0, 1]
    assert document["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "replicas": [2, 3, 4],
        "log_dirs": ["any", "any", "any"],
    }
    assert parse_plan(json.dumps(document)) == plan


def test_kafka_plan_without_log_dirs():
    text = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}'
    assert parse_plan(text) == {T0: (2, 3, 4)}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 2, "partitions": []}',
        '{"partitions": [{"partition": 0, "replicas": [1]}]}',
        '{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": "1,2"}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
        ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
    ],
)
def test_bad_plans(text):
    with pytest.raises(PlanError):
        parse_plan(text)


def test_parse_nodes():
    assert parse_nodes("1,2,4") == (1, 2, 4)
    for bad in ("", "1,x", "1,1"):
        with pytest.raises(PlanError):
            parse_nodes(bad)


def test_generate_keeps_replication_factor_and_spreads():
    current = {T0: (1, 2, 3), T1: (2, 3, 1), TopicPartition("u", 0): (1,)}
    plan = generate(current, (1, 2, 4))
    assert plan == {T0: (1, 2, 4), T1: (2, 4, 1), TopicPartition("u", 0): (1,)}
    assert all(len(set(r)) == len(r) for r in plan.values())


def test_generate_needs_enough_nodes():
    with pytest.raises(PlanError):
        generate({T0: (1, 2, 3)}, (1, 2))


def test_verify_states():
    plan = {T0: (2, 3, 4), T1: (1, 2), TopicPartition("t", 2): (3, 4)}
    rows = verify(
        plan, {T0: (2, 3, 4), T1: (1, 2, 3), TopicPartition("t", 2): (1, 2)}, {T1: (1, 2)}
    )
    assert [r.state for r in rows] == ["complete", "in_progress", "mismatch"]
    text = verification_text(rows)
    assert "Reassignment of partition t-0 is completed." in text
    assert "Reassignment of partition t-1 is still in progress." in text
    assert "t-2, but replica set is [1, 2] rather than [3, 4]" in text


def test_list_output():
    logs = {1: (50, 5000), 4: (20, 1800)}
    moves = {T0: PartitionReassignment((2, 3, 4, 1), (4,), (1,), (1, 2, 3), 1, logs)}
    document = ongoing_document(moves)
    [row] = document["partitions"]
    assert row["target_replicas"] == [2, 3, 4]
    assert (row["bytes_copied"], row["bytes_remaining"]) == (1800, 3200)
    assert ongoing_text(document) == (
        "Current partition reassignments:\n"
        "t-0: replicas: 2,3,4,1. adding: 4. removing: 1. isr: 1,2,3. leader: 1. "
        "copied: 1800 B. remaining: 3200 B."
    )
    unknown = PartitionReassignment((2, 3, 4, 1), (4,), (1,), (1, 2, 3), 1, {4: (1, 9)})
    assert (unknown.bytes_copied, unknown.bytes_remaining) == (9, None)
    assert ongoing_text(ongoing_document({})) == "No partition reassignments found."


def test_parser_actions_are_exclusive():
    parser = build_parser()
    args = parser.parse_args(["partitions", "reassign", "--plan", "p.json", "--execute"])
    assert args.execute and str(args.plan) == "p.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["partitions", "reassign", "--execute", "--cancel"])
    with pytest.raises(SystemExit):
        parser.parse_args(["partitions", "reassign"])


def test_progress_line():
    moves = {
        T0: PartitionReassignment((2, 3, 4, 1), (4,), (1,), (1, 2, 3, 4), 1),
        T1: PartitionReassignment((5, 6, 1), (5, 6), (1,), (1,), 1),
    }
    assert progress_line(moves, width=6) == (
        "[##----] 1/3 new replicas in sync, 2 partitions moving"
    )


def test_progress_line_is_weighted_by_bytes():
    """A 1 MiB partition fully copied weighs little next to a 3 MiB one not yet started: the
    bar shows a quarter, where counting in-sync replicas would show a half."""
    mib = 1 << 20
    moves = {
        T0: PartitionReassignment(
            (2, 3, 4, 1), (4,), (1,), (1, 2, 3, 4), 1, {1: (9, mib), 4: (9, mib)}
        ),
        T1: PartitionReassignment((5, 3, 1), (5,), (1,), (1, 3), 1, {1: (30, 3 * mib), 5: (0, 0)}),
    }
    assert progress_line(moves, width=8) == (
        "[##------] 25% 1.0 MiB of 4.0 MiB copied, 1/2 new replicas in sync, 2 partitions moving"
    )
    unknown = {T0: moves[T0], T1: PartitionReassignment((5, 3, 1), (5,), (1,), (1, 3), 1)}
    assert progress_line(unknown, width=8).startswith("[####----] 1/2 new replicas in sync")


def test_progress_line_of_empty_partitions_counts_the_replicas_in_sync():
    """Nothing to copy is not 100% done: the new replica has still to join the ISR."""
    empty = {T0: PartitionReassignment((2, 3, 4, 1), (4,), (1,), (1, 2, 3), 1, {1: (0, 0)})}
    assert empty[T0].bytes_remaining == 0
    assert progress_line(empty, width=4) == "[----] 0/1 new replicas in sync, 1 partitions moving"


def test_topic_describe_shows_a_move_in_progress():
    moving = AdminPartitionInfo(0, 1, 3, (2, 3, 4, 1), (1, 2, 3), (4,), (1,))
    idle = AdminPartitionInfo(1, 2, 0, (2, 3), (2, 3))
    topic = TopicDescription("t", "id", False, (moving, idle), {})
    lines = topic_text(topic_json(topic)).splitlines()
    assert "Adding Replicas: 4" in lines[1] and "Removing Replicas: 1" in lines[1]
    assert "Adding" not in lines[2]
    assert topic_json(topic)["partitions"][0]["adding_replicas"] == [4]


def test_partition_state_wire_round_trip_keeps_the_move():
    moving = PartitionInfo(0, 1, 3, (2, 3, 4, 1), (1, 2, 3), 7, (4,), (1,))
    assert partition_from_proto(partition_to_proto(moving)) == moving
