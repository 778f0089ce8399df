"""`riverlog configs`: kafka-configs.sh's --add-config syntax and the command's arguments, and
the throttle flag of `partitions reassign`."""

from __future__ import annotations

import pytest

from riverlog.cli.commands.configs import parse_add_config
from riverlog.cli.console import CliError
from riverlog.cli.main import build_parser


def test_add_config_syntax_with_brackets_for_lists() -> None:
    assert parse_add_config(
        [
            "leader.replication.throttled.rate=1048576,follower.replication.throttled.rate=10",
            "leader.replication.throttled.replicas=[0:1,0:2,1:3]",
        ]
    ) == {
        "leader.replication.throttled.rate": "1048576",
        "follower.replication.throttled.rate": "10",
        "leader.replication.throttled.replicas": "0:1,0:2,1:3",
    }
    assert parse_add_config(["a=*"]) == {"a": "*"}


@pytest.mark.parametrize("text", ["novalue", "=1", "a=1,,=2"])
def test_malformed_add_config(text: str) -> None:
    with pytest.raises(CliError):
        parse_add_config([text])


def test_parser() -> None:
    parser = build_parser()
    args = parser.parse_args(
        [
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "leader.replication.throttled.rate=5",
        ]
    )
    assert args.entity_default and args.entity_type == "brokers"
    with pytest.raises(SystemExit):
        parser.parse_args(
            [
                "configs",
                "describe",
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--entity-default",
            ]
        )
    with pytest.raises(SystemExit):
        parser.parse_args(["configs", "describe", "--entity-type", "groups"])
    reassign = parser.parse_args(
        ["partitions", "reassign", "--plan", "p.json", "--execute", "--throttle", "524288"]
    )
    assert reassign.throttle == 524288
