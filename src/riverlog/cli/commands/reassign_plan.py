"""Kafka's JSON reassignment format and what `riverlog partitions reassign` computes from it,
as pure functions (no cluster), so the CLI's parsing, plan generation and verification are
unit-tested alone.

The format is kafka-reassign-partitions.sh's:
`{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}, ...]}`
(`log_dirs`, when present, must be "any" for every replica: Riverlog places a replica's log dir
itself). `--generate` spreads each topic's partitions over the given nodes round robin, keeping
each partition's replication factor and starting each partition one node further along (the
rack-unaware part of Kafka's `assignReplicasToBrokers`, with a fixed start for a stable plan).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from riverlog.common.types import TopicPartition

PLAN_VERSION = 1

Plan = dict[TopicPartition, tuple[int, ...]]


class PlanError(ValueError):
    """The plan file or the arguments cannot make a valid plan."""


def parse_plan(text: str) -> Plan:
    """Partition → target replicas, from Kafka's JSON; PlanError names what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the plan is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise PlanError('the plan needs {"version": 1, "partitions": [...]}')
    if doc.get("version", PLAN_VERSION) != PLAN_VERSION:
        raise PlanError(f"unsupported plan version {doc.get('version')!r} (only 1)")
    plan: Plan = {}
    for i, entry in enumerate(doc["partitions"]):
        if not isinstance(entry, dict):
            raise PlanError(f"partitions[{i}] is not an object")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise PlanError(f"partitions[{i}]: a topic name is needed")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise PlanError(f"partitions[{i}]: a partition number is needed")
        if not isinstance(replicas, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in replicas
        ):
            raise PlanError(f"partitions[{i}]: replicas must be a list of node ids")
        dirs = entry.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            raise PlanError(f'partitions[{i}]: log_dirs other than "any" are not supported')
        tp = TopicPartition(topic, partition)
        if tp in plan:
            raise PlanError(f"{topic}-{partition} appears twice in the plan")
        plan[tp] = tuple(replicas)
    return plan


def plan_document(plan: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    """Kafka's JSON document for `plan`, by topic and partition."""
    return {
        "version": PLAN_VERSION,
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(plan[tp]),
                "log_dirs": ["any"] * len(plan[tp]),
            }
            for tp in sorted(plan, key=lambda t: (t.topic, t.partition))
        ],
    }


def parse_nodes(text: str) -> tuple[int, ...]:
    """`"1,2,4"` → (1, 2, 4); PlanError on anything else or duplicates."""
    try:
        nodes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise PlanError(f"--nodes must be comma-separated node ids: {text!r}") from None
    if not nodes or len(set(nodes)) != len(nodes):
        raise PlanError(f"--nodes must name distinct node ids: {text!r}")
    return nodes


def generate(current: Mapping[TopicPartition, Sequence[int]], nodes: Sequence[int]) -> Plan:
    """Move every partition of `current` onto `nodes`, keeping its replication factor."""
    plan: Plan = {}
    ordered = sorted(current, key=lambda t: (t.topic, t.partition))
    for tp in ordered:
        factor = len(current[tp])
        if factor > len(nodes):
            raise PlanError(
                f"{tp.topic}-{tp.partition} has {factor} replicas but only {len(nodes)} "
                "nodes were given"
            )
        start = tp.partition % len(nodes)
        plan[tp] = tuple(nodes[(start + j) % len(nodes)] for j in range(factor))
    return plan


@dataclass(frozen=True, slots=True)
class Verification:
    """One partition of `--verify`: done, still moving, or settled on other replicas."""

    tp: TopicPartition
    state: str  # "complete", "in_progress", "mismatch"
    replicas: tuple[int, ...]
    target: tuple[int, ...]


def verify(
    plan: Mapping[TopicPartition, Sequence[int]],
    replicas: Mapping[TopicPartition, Sequence[int]],
    ongoing: Mapping[TopicPartition, Sequence[int]],
) -> list[Verification]:
    """Compare each planned partition with its current `replicas` and the `ongoing` moves'
    targets (Kafka's `--verify`)."""
    out: list[Verification] = []
    for tp in sorted(plan, key=lambda t: (t.topic, t.partition)):
        target = tuple(plan[tp])
        now = tuple(replicas.get(tp, ()))
        if tp in ongoing:
            state = "in_progress"
        elif now == target:
            state = "complete"
        else:
            state = "mismatch"
        out.append(Verification(tp, state, now, target))
    return out


def verification_text(rows: Sequence[Verification]) -> str:
    """Kafka's `--verify` lines."""
    lines = ["Status of partition reassignment:"]
    for v in rows:
        name = f"{v.tp.topic}-{v.tp.partition}"
        if v.state == "complete":
            lines.append(f"Reassignment of partition {name} is completed.")
        elif v.state == "in_progress":
            lines.append(f"Reassignment of partition {name} is still in progress.")
        else:
            lines.append(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{list(v.replicas)} rather than {list(v.target)}."
            )
    return "\n".join(lines)
