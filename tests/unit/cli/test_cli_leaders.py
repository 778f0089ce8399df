"""`topics describe` partition filters and flags, and `leaders elect` parsing and Kafka's
report, on fakes (no cluster)."""

from __future__ import annotations

import pytest

from riverlog.cli.commands.leaders import election_document, election_text
from riverlog.cli.commands.topics import keep_partitions, topic_json, topic_text
from riverlog.cli.main import build_parser
from riverlog.client import TopicDescription
from riverlog.client.admin import PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition


def description() -> TopicDescription:
    return TopicDescription(
        name="t",
        topic_id="id",
        internal=False,
        partitions=(
            PartitionInfo(0, 1, 2, (1, 2), (1, 2)),
            PartitionInfo(1, 2, 4, (2, 1), (2,)),
            PartitionInfo(2, -1, 5, (1, 2), (1,)),
        ),
        configs={},
    )


def test_filters_keep_under_replicated_or_unavailable_partitions() -> None:
    document = topic_json(description())
    under = keep_partitions(document, True, False)
    assert [p["partition"] for p in under["partitions"]] == [1, 2]
    offline = keep_partitions(document, False, True)
    assert [p["partition"] for p in offline["partitions"]] == [2]
    assert keep_partitions(document, False, False) is document
    lines = topic_text(offline, header=False).splitlines()
    assert lines == [
        "\tTopic: t\tPartition: 2\tLeader: none\tLeaderEpoch: 5\tReplicas: 1,2\tIsr: 1"
        "\tOffline UnderReplicated"
    ]


def test_leaders_elect_parsing() -> None:
    parser = build_parser()
    args = parser.parse_args(["leaders", "elect", "--preferred", "--topic", "t"])
    assert (args.election_type, args.topic, args.partition) == ("preferred", "t", None)
    args = parser.parse_args(["leaders", "elect", "--unclean", "--topic", "t", "--partition", "3"])
    assert (args.election_type, args.partition) == ("unclean", 3)
    with pytest.raises(SystemExit):
        parser.parse_args(["leaders", "elect"])  # one of --preferred / --unclean
    with pytest.raises(SystemExit):
        parser.parse_args(["leaders", "elect", "--preferred", "--unclean"])


def test_election_report_in_kafkas_words() -> None:
    outcomes = {
        TopicPartition("t", 1): None,
        TopicPartition("t", 0): RiverlogError("no need", ErrorCode.ELECTION_NOT_NEEDED),
        TopicPartition("t", 2): RiverlogError(
            "replica 1 is down", ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        ),
    }
    document = election_document("preferred", outcomes)
    assert [r["partition"] for r in document["partitions"]] == [0, 1, 2]
    assert election_text(document).splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-1",
        "Valid replica already elected for partitions t-0",
        "Error completing leader election (PREFERRED) for partitions:",
        "t-2: PREFERRED_LEADER_NOT_AVAILABLE: replica 1 is down",
    ]
