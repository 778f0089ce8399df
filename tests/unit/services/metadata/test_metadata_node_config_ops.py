"""Incremental ops on a node config entity: applied in full or refused, changing nothing."""

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from riverlog.services.metadata.controller.node_configs import apply_node_config_ops
from riverlog.services.metadata.controller.topic_validation import ConfigOp


def test_set_and_delete() -> None:
    current = {LEADER_THROTTLED_RATE: "10"}
    ops = [
        ConfigOp(FOLLOWER_THROTTLED_RATE, "20", "SET"),
        ConfigOp(LEADER_THROTTLED_RATE, "", "DELETE"),
    ]
    assert apply_node_config_ops(current, ops) == {FOLLOWER_THROTTLED_RATE: "20"}
    assert current == {LEADER_THROTTLED_RATE: "10"}


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ([ConfigOp("replica.fetch.max.bytes", "1", "SET")], ErrorCode.INVALID_CONFIG),
        ([ConfigOp("no.such.key", "", "DELETE")], ErrorCode.INVALID_CONFIG),
        ([ConfigOp(LEADER_THROTTLED_RATE, "-5", "SET")], ErrorCode.INVALID_CONFIG),
        (
            [
                ConfigOp(LEADER_THROTTLED_RATE, "5", "SET"),
                ConfigOp(LEADER_THROTTLED_RATE, "", "DELETE"),
            ],
            ErrorCode.INVALID_REQUEST,
        ),
        ([ConfigOp(LEADER_THROTTLED_RATE, "5", "APPEND")], ErrorCode.INVALID_REQUEST),
    ],
)
def test_refused_ops(ops: list[ConfigOp], code: ErrorCode) -> None:
    with pytest.raises(RiverlogError) as info:
        apply_node_config_ops({}, ops)
    assert info.value.code == code
