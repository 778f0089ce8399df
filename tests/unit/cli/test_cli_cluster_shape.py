"""`riverlog cluster remove storage N`'s drain plan (pure), the launcher's pure helpers for
adding a process, and the argument parsing of `cluster start|stop|restart|add|remove`."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from riverlog.cli.commands.drain_plan import DrainError, drain_plan
from riverlog.cli.main import build_parser
from riverlog.client import TopicPartition
from riverlog.cluster.process import ProcessSpec
from riverlog.cluster.shape import next_node_id, shape_lock, with_metadata, without_option

pytestmark = pytest.mark.timeout(10)


def tp(partition: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, partition)


def test_drain_keeps_the_replication_factor_and_avoids_the_leaving_node():
    current = {tp(0): (1, 2, 3), tp(1): (2, 3, 4), tp(2): (3, 1, 4)}
    plan = drain_plan(current, leaving=1, live=[1, 2, 3, 4, 5])
    assert set(plan) == {tp(0), tp(2)}  # t-1 has no replica on node 1
    for partition, target in plan.items():
        assert len(target) == len(current[partition])
        assert 1 not in target and len(set(target)) == len(target)


def test_drain_appends_so_the_next_replica_becomes_preferred_leader():
    assert drain_plan({tp(0): (1, 2, 3)}, leaving=1, live=[1, 2, 3, 4]) == {tp(0): (2, 3, 4)}


def test_drain_spreads_over_the_least_loaded_nodes():
    current = {tp(p): (1,) for p in range(4)} | {tp(9, "other"): (2,)}
    plan = drain_plan(current, leaving=1, live=[1, 2, 3, 4])
    placed = sorted(target[0] for target in plan.values())
    assert placed == [2, 3, 3, 4]  # node 2 already had one replica


def test_drain_prefers_a_rack_the_partition_does_not_use():
    racks = {1: "a", 2: "b", 3: "b", 4: "a", 5: "c"}
    current = {tp(0): (1, 3), tp(1): (4, 3)}
    plan = drain_plan(current, leaving=1, live=racks, racks=racks)
    assert plan == {tp(0): (3, 5)}  # node 2 has the lowest id and load, but 3 uses rack b
    assert drain_plan({tp(0): (1, 3)}, leaving=1, live=[1, 2, 3]) == {tp(0): (3, 2)}


def test_drain_refused_when_the_rest_cannot_hold_the_replication_factor():
    current = {tp(0): (1, 2, 3), tp(1): (2, 3)}
    with pytest.raises(DrainError, match="t-0"):
        drain_plan(current, leaving=1, live=[1, 2, 3])


def test_drain_ignores_dead_nodes_and_is_empty_for_an_empty_node():
    with pytest.raises(DrainError):
        drain_plan({tp(0): (1, 2)}, leaving=1, live=[1, 2])  # 3 is not live
    assert drain_plan({tp(0): (2, 3)}, leaving=1, live=[1, 2, 3]) == {}


def test_drain_never_targets_another_draining_node():
    current = {tp(0): (1, 2, 3), tp(1): (1, 3, 4)}
    plan = drain_plan(current, leaving=1, live=[1, 2, 3, 4, 5], draining=[1, 4])
    assert plan == {tp(0): (2, 3, 5), tp(1): (3, 4, 2)}  # 4 is kept where it is, never added
    with pytest.raises(DrainError, match="not being drained"):
        drain_plan({tp(0): (1, 2, 3)}, leaving=1, live=[1, 2, 3, 4], draining=[4])


def test_drain_and_remove_take_throttle_cancel_and_json():
    parser = build_parser()
    args = parser.parse_args(["partitions", "drain", "--node", "3", "--throttle", "1000", "--json"])
    assert (args.node, args.throttle, args.json, args.cancel) == (3, 1000, True, False)
    assert parser.parse_args(["partitions", "drain", "--node", "3", "--cancel"]).cancel
    args = parser.parse_args(["cluster", "remove", "storage", "4", "--throttle", "5", "--json"])
    assert (args.node_id, args.throttle, args.json) == (4, 5, True)


def test_next_node_id_skips_ids_with_stale_data():
    assert next_node_id([1, 2, 3]) == 4
    assert next_node_id([]) == 1
    assert next_node_id([1, 3], lambda n: n in (4, 5)) == 6


def test_with_metadata_and_without_option():
    args = ("py", "--metadata", "a:1", "--rack", "r1")
    spec = ProcessSpec("storage-1", "storage", 1, args, log_path=Path("storage-1.log"))
    assert with_metadata(spec, ["b:2", "c:3"]).args == (
        "py",
        "--metadata",
        "b:2,c:3",
        "--rack",
        "r1",
    )
    assert without_option(spec.args, "--rack") == ("py", "--metadata", "a:1")


def test_shape_lock_excludes_a_second_holder_until_released(tmp_path: Path):
    def try_lock() -> bool:
        with open(tmp_path / "run" / "shape.lock", "a+b") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    with shape_lock(tmp_path):
        assert not try_lock()
    assert try_lock()


@pytest.mark.parametrize(
    "argv",
    [
        ["cluster", "stop", "storage", "2"],
        ["cluster", "start", "metadata", "1", "--timeout", "30"],
        ["cluster", "restart", "gateway", "1", "--grace", "1"],
        ["cluster", "add", "storage", "--rack", "r2"],
        ["cluster", "add", "coordinator"],
        ["cluster", "remove", "storage", "3", "--drain-timeout", "60"],
        ["cluster", "remove", "quota", "1"],
        ["cluster", "add", "metadata"],
        ["cluster", "remove", "metadata", "1"],
        ["cluster", "up", "--resume"],
        ["partitions", "drain", "--node", "3", "--timeout", "60"],
        ["partitions", "reassign", "--list", "--topics", "a,b"],
    ],
)
def test_shape_commands_parse(argv: list[str]):
    args = build_parser().parse_args(argv)
    assert callable(args.func)


@pytest.mark.parametrize(
    "argv",
    [
        ["cluster", "add", "etcd"],
        ["cluster", "remove", "metadata"],
        ["partitions", "drain"],
        ["cluster", "up", "--resume", "--clean"],
    ],
)
def test_refused_forms(argv: list[str]):
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
