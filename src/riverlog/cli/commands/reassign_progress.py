"""The progress bar of moves in progress, shown by `partitions reassign --wait`, `partitions
drain`, `cluster remove storage` and `cluster balance --wait`, as a pure function of the
ListPartitionReassignments answer, so it is unit-tested alone.

The bar is weighted by bytes: what the adding replicas copied out of what they copied plus what
they still lack next to the leader (`bytes_copied`, `bytes_remaining`, from the storage nodes'
DescribeLogDirs), so a partition of 1 GB weighs a thousand times one of 1 MB. When a move's
sizes are unknown (its leader's node did not answer in time), or there are no bytes to copy
(empty partitions: the bytes say nothing of whether the new replicas joined), the bar counts
the adding replicas that joined the ISR, as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.client import PartitionReassignment
from riverlog.common.types import TopicPartition

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(count: int) -> str:
    """1536 → "1.5 KiB"."""
    value = float(count)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def progress_line(moves: Mapping[TopicPartition, PartitionReassignment], width: int = 20) -> str:
    """A progress bar of the moves: bytes copied of bytes to copy when every move's sizes are
    known and there are some, else the adding replicas already in the ISR of all adding ones."""
    adding = sum(len(m.adding_replicas) for m in moves.values())
    joined = sum(len([r for r in m.adding_replicas if r in m.isr]) for m in moves.values())
    in_sync = f"{joined}/{adding} new replicas in sync, {len(moves)} partitions moving"
    remaining = [m.bytes_remaining for m in moves.values()]
    copied = sum(m.bytes_copied for m in moves.values())
    total = copied + sum(r for r in remaining if r is not None)
    if moves and None not in remaining and total > 0:
        filled = width * copied // total
        percent = 100 * copied // total
        return (
            f"[{_bar(filled, width)}] {percent}% {human_bytes(copied)} of "
            f"{human_bytes(total)} copied, {in_sync}"
        )
    filled = width * joined // adding if adding else width
    return f"[{_bar(filled, width)}] {in_sync}"


def _bar(filled: int, width: int) -> str:
    return "#" * filled + "-" * (width - filled)
