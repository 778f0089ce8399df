import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.topic_config import (
    TOPIC_CONFIGS,
    check_combination,
    render,
    resolve,
    validate,
)


def test_defaults_are_kafkas() -> None:
    values = resolve({})
    assert values["retention.ms"] == 604_800_000
    assert values["segment.bytes"] == 1_073_741_824
    assert values["cleanup.policy"] == ("delete",)
    assert values["unclean.leader.election.enable"] is False
    assert values["min.insync.replicas"] == 1


def test_overrides_are_typed() -> None:
    values = resolve(
        {
            "retention.ms": " 1000 ",
            "cleanup.policy": "compact,delete",
            "unclean.leader.election.enable": "TRUE",
        }
    )
    assert values["retention.ms"] == 1000
    assert values["cleanup.policy"] == ("compact", "delete")
    assert values["unclean.leader.election.enable"] is True


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("retention.ms", "soon", "expected a long"),
        ("retention.ms", "-2", "at least -1"),
        ("segment.bytes", "3", "at least 14"),
        ("segment.bytes", str(2**40), "at most"),
        ("cleanup.policy", "shred", "one of"),
        ("message.timestamp.type", "WallTime", "one of"),
        ("unclean.leader.election.enable", "yes", "expected a boolean"),
        ("min.insync.replicas", "0", "at least 1"),
    ],
)
def test_bad_values_name_the_key_and_the_rule(name: str, value: str, fragment: str) -> None:
    with pytest.raises(RiverlogError) as info:
        validate({name: value})
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert name in info.value.message and fragment in info.value.message


def test_unknown_names_are_refused() -> None:
    with pytest.raises(RiverlogError) as info:
        validate({"retention.hours": "1"})
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert "retention.hours" in info.value.message


def test_render_round_trips_every_default() -> None:
    for name, definition in TOPIC_CONFIGS.items():
        assert definition.parse(render(definition.default)) == definition.default, name


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_remote_storage_is_refused_on_compacted_topics(policy: str) -> None:
    """Kafka's rule: tiered storage only for cleanup.policy=delete (INVALID_CONFIG, 40)."""
    with pytest.raises(RiverlogError) as info:
        check_combination({"remote.storage.enable": "true", "cleanup.policy": policy})
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert f"remote.storage.enable=true is not allowed with cleanup.policy={policy}" in (
        info.value.message
    )
    for fine in (
        {"remote.storage.enable": "true"},
        {"remote.storage.enable": "true", "cleanup.policy": "delete"},
        {"remote.storage.enable": "false", "cleanup.policy": policy},
        {"cleanup.policy": policy},
        {},
    ):
        check_combination(fine)
