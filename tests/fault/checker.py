"""The fault tests' checker: it compares what the workload was promised with what the cluster
holds afterwards and returns a `Report`.

`check` finds acknowledged records lost, duplicated, misplaced or out of producer order (a
producer without idempotence may write a record twice when it retries a request whose answer
was lost, as Kafka's: with `allow_duplicates` such earlier copies are counted, not problems);
replicas that hold different records at one offset; records a consumer saw above the high
watermark or that were later truncated; and (`unavailability`) how long the affected
partitions had no acknowledged produce after the fault. It works on plain data (the
workload's acks, read-back records, replica logs, the watcher's history), so its own tests
run on synthetic histories without a cluster.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from observers import HighWatermarkWatcher, LeaderSample
from workload import Ack, Workload, record_id


@dataclass
class Report:
    """What the checker found. `problems` empty means every guarantee held."""

    acked: int = 0
    read: int = 0
    seen_concurrently: int = 0
    replicas_compared: int = 0
    unacked_in_log: int = 0
    lost: list[str] = field(default_factory=list)
    retried_copies: int = 0
    problems: list[str] = field(default_factory=list)
    unavailable_s: dict[int, float | None] = field(default_factory=dict)

    @property
    def max_unavailable_s(self) -> float | None:
        values = [v for v in self.unavailable_s.values() if v is not None]
        if len(values) < len(self.unavailable_s):
            return None  # a partition never came back
        return max(values, default=0.0)

    def summary(self, name: str) -> str:
        worst = self.max_unavailable_s
        unavailable = "never recovered" if worst is None else f"{worst:.2f} s"
        return (
            f"[fault] {name}: checked {self.acked} acknowledged records "
            f"({self.read} read back, {self.seen_concurrently} seen during the fault, "
            f"{self.replicas_compared} replica records compared, "
            f"{self.unacked_in_log} unacknowledged in the log); "
            f"leadership unavailable {unavailable} on partitions "
            f"{sorted(self.unavailable_s)}; lost {len(self.lost)}; "
            f"earlier copies of retried records {self.retried_copies}; "
            f"problems {len(self.problems)}"
        )


def _note(problems: list[str], limit: int, message: str) -> None:
    if len(problems) < limit:
        problems.append(message)
    elif len(problems) == limit:
        problems.append("... (more problems left out)")


def unavailability(
    acks: Iterable[Ack], fault_at: float, partitions: Iterable[int]
) -> dict[int, float | None]:
    """Per affected partition: seconds from the fault to the first acknowledgement of a record
    sent at or after it (None: there was none)."""
    first: dict[int, float] = {}
    for ack in acks:
        if ack.sent_at >= fault_at and ack.acked_at < first.get(ack.partition, float("inf")):
            first[ack.partition] = ack.acked_at
    return {p: (first[p] - fault_at if p in first else None) for p in partitions}


def check(
    workload: Workload,
    read: Mapping[int, list[tuple[int, bytes | None]]],
    replica_logs: Mapping[int, Mapping[int, Mapping[int, bytes | None]]],
    watcher: HighWatermarkWatcher | None = None,
    affected: Iterable[int] = (),
    allow_loss: bool = False,
    allow_duplicates: bool = False,
    limit: int = 20,
) -> Report:
    """Hold the final state to the guarantees (see the module docstring). With `allow_loss`
    (unclean election) an acknowledged record may be missing, or found only where an earlier
    unacknowledged attempt of it was written on the replica that won the election; those are
    listed in `lost`, not in `problems`, but nothing may be duplicated, reordered or diverge.
    With `allow_duplicates` (a producer without idempotence, which retries) an acknowledged
    record may also have copies below the offset it was acknowledged at, in the same partition:
    earlier attempts whose answers were lost. They are counted in `retried_copies`; a copy
    anywhere else is still a problem."""
    report = Report(acked=len(workload.acks))
    problems = report.problems
    # Per partition: offsets strictly increasing; where every id is.
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    by_offset: dict[tuple[int, int], bytes | None] = {}
    for p, records in read.items():
        last = -1
        for offset, value in records:
            report.read += 1
            if offset <= last:
                _note(problems, limit, f"p{p}: offset {offset} read after {last}")
            last = offset
            by_offset[(p, offset)] = value
            rid = record_id(value)
            if rid is not None:
                where[rid].append((p, offset))
    acked_ids = set()
    for ack in workload.acks:
        acked_ids.add(ack.record_id)
        found = where.get(ack.record_id, [])
        label = f"{ack.record_id.decode()} acked at p{ack.partition}@{ack.offset}"
        if not found:
            if allow_loss:
                report.lost.append(label)
            else:
                _note(problems, limit, f"LOST: {label}, not in the log")
        elif len(found) > 1 and not (
            allow_duplicates
            and (ack.partition, ack.offset) in found
            and all(p == ack.partition and o <= ack.offset for p, o in found)
        ):
            _note(problems, limit, f"DUPLICATE: {label}, read at {found}")
        elif len(found) > 1:
            report.retried_copies += len(found) - 1
        elif found[0] != (ack.partition, ack.offset):
            if allow_loss:  # lost where it was acked; an earlier unacknowledged copy survived
                report.lost.append(f"{label}, an unacknowledged copy read at {found[0]}")
            else:
                _note(problems, limit, f"MISPLACED: {label}, read at {found[0]}")
    report.unacked_in_log = sum(1 for rid in where if rid not in acked_ids)
    # Order: one producer's acknowledged records of one partition in send order.
    # With allow_loss, records an unclean election dropped left the history: their offsets
    # were given to later records, so only the surviving ones are held to the order.
    per_stream: dict[tuple[int, int], list[Ack]] = defaultdict(list)
    for ack in workload.acks:
        if not allow_loss or where.get(ack.record_id) == [(ack.partition, ack.offset)]:
            per_stream[(ack.producer, ack.partition)].append(ack)
    for (producer, p), acks in per_stream.items():
        acks.sort(key=lambda a: a.seq)
        for a, b in itertools.pairwise(acks):
            if b.offset <= a.offset:
                _note(
                    problems,
                    limit,
                    f"REORDERED: producer {producer} p{p}: seq {a.seq}@{a.offset} "
                    f"then seq {b.seq}@{b.offset}",
                )
                break
    # Replicas: no offset holds two different records; each agrees with what was read.
    for p, logs in replica_logs.items():
        ends = {node: max(r, default=-1) + 1 for node, r in logs.items()}
        if len(set(ends.values())) > 1:
            _note(problems, limit, f"NOT CONVERGED: p{p} replica log end offsets {ends}")
        nodes = sorted(logs)
        for node in nodes:
            for offset, value in logs[node].items():
                report.replicas_compared += 1
                expected = by_offset.get((p, offset))
                if (p, offset) in by_offset and expected != value:
                    _note(
                        problems,
                        limit,
                        f"DIVERGED: p{p}@{offset} on node {node} holds "
                        f"{value[:24] if value else value!r}, "
                        f"consumers read {expected[:24] if expected else expected!r}",
                    )
        for node_a, node_b in itertools.combinations(nodes, 2):
            for offset in logs[node_a].keys() & logs[node_b].keys():
                if logs[node_a][offset] != logs[node_b][offset]:
                    _note(
                        problems,
                        limit,
                        f"DIVERGED: p{p}@{offset} differs on nodes {node_a}, {node_b}",
                    )
    # The concurrent consumer: never above the high watermark, never later truncated.
    if watcher is not None:
        report.seen_concurrently = len(watcher.seen)
        for seen in watcher.seen:
            label = f"p{seen.partition}@{seen.offset}"
            if seen.offset >= seen.high_watermark:
                _note(problems, limit, f"ABOVE HW: {label} seen with HW {seen.high_watermark}")
            final = by_offset.get((seen.partition, seen.offset), b"<missing>")
            if final != seen.value and not allow_loss:
                _note(
                    problems,
                    limit,
                    f"TRUNCATED AFTER READ: {label} was {record_id(seen.value)!r}, "
                    f"now {record_id(final)!r}",
                )
    if workload.fault_at is not None:
        report.unavailable_s = unavailability(workload.acks, workload.fault_at, affected)
    return report


def check_leader_epochs(samples: Iterable[LeaderSample], limit: int = 20) -> list[str]:
    """Leader epochs only grow: per partition, an epoch never goes back, and one epoch never
    has two different leaders (a leader of -1, no leader, is not a leader)."""
    problems: list[str] = []
    last_epoch: dict[int, int] = {}
    leader_of: dict[tuple[int, int], int] = {}
    for s in sorted(samples, key=lambda s: s.at):
        if s.epoch < last_epoch.get(s.partition, -1):
            _note(
                problems,
                limit,
                f"EPOCH WENT BACK: p{s.partition} epoch {s.epoch} after "
                f"{last_epoch[s.partition]} (leader {s.leader})",
            )
        last_epoch[s.partition] = max(s.epoch, last_epoch.get(s.partition, -1))
        if s.leader >= 0:
            known = leader_of.setdefault((s.partition, s.epoch), s.leader)
            if known != s.leader:
                _note(
                    problems,
                    limit,
                    f"TWO LEADERS IN ONE EPOCH: p{s.partition} epoch {s.epoch}: "
                    f"{known} and {s.leader}",
                )
    return problems


def check_bytes(
    replica_bytes: Mapping[int, Mapping[int, bytes]], limit: int = 20
) -> tuple[int, list[str]]:
    """Every replica of a partition holds the same batches byte for byte (the leader's bytes:
    followers copy batches verbatim). Returns (bytes compared, problems)."""
    problems: list[str] = []
    compared = 0
    for p, copies in replica_bytes.items():
        distinct = set(copies.values())
        compared += sum(len(data) for data in copies.values())
        if len(distinct) > 1:
            sizes = {node: len(data) for node, data in copies.items()}
            first = min(copies)
            differ = [node for node, data in copies.items() if data != copies[first]]
            _note(
                problems,
                limit,
                f"BYTES DIFFER: p{p} replica logs (sizes {sizes}) differ on {differ} from {first}",
            )
    return compared, problems
