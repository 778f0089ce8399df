"""`riverlog cluster balance`: the controller's plan as text and JSON (moves, per-node counts
before and after, spreads), read from the wire shape the metadata service answers with, and the
command's argument parsing."""

from __future__ import annotations

import pytest

from riverlog.cli.commands.cluster_balance import plan_document, plan_text
from riverlog.cli.main import build_parser
from riverlog.client.balance_admin import plan_from_proto
from riverlog.services.metadata.controller.balance_plan import (
    BalancerNode,
    BalancerPartition,
    plan_balance,
)
from riverlog.services.metadata.rpc.balancer import plan_to_proto


class _Config:
    balancer_enable = False
    balancer_max_concurrent_moves = 2


class _Balancer:
    running = False
    config = _Config()


def wire_plan() -> object:
    nodes = [BalancerNode(1), BalancerNode(2), BalancerNode(3)]
    partitions = [BalancerPartition("t", i, (1, 2), 1, (1, 2)) for i in range(3)]
    plan = plan_balance(nodes, partitions, max_moves=2)
    return plan_from_proto(plan_to_proto(plan, _Balancer(), {1: "a"}))  # type: ignore[arg-type]


def test_the_plan_survives_the_wire_and_prints_as_json() -> None:
    plan = wire_plan()
    document = plan_document(plan)  # type: ignore[arg-type]
    assert document["replica_spread"] == {"before": 3, "after": 0}
    assert document["max_concurrent_moves"] == 2 and not document["running"]
    copying = [m for m in document["moves"] if set(m["current"]) != set(m["target"])]
    assert len(copying) == 2
    assert all(len(m["target"]) == 2 and 3 in m["target"] for m in copying)
    nodes = {n["node_id"]: n for n in document["nodes"]}
    assert nodes[3]["replicas_before"] == 0 and nodes[3]["replicas_after"] == 2
    assert nodes[1]["rack"] == "a" and nodes[1]["bytes_before"] is None  # sizes unknown
    assert document["notes"]


def test_the_plan_prints_as_text() -> None:
    text = plan_text(wire_plan())  # type: ignore[arg-type]
    assert "at most 2 copying at a time" in text
    assert "Replica spread 3 -> 0" in text
    assert "0 -> 2" in text  # node 3's replicas


def test_wait_goes_with_execute_only() -> None:
    args = build_parser().parse_args(["cluster", "balance", "--execute", "--wait", "--json"])
    assert args.execute and args.wait and args.json and not args.dry_run
    with pytest.raises(SystemExit):
        build_parser().parse_args(["cluster", "balance", "--dry-run", "--execute"])
