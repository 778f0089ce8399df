"""The transactions fault test's checker, after Jepsen's analyses of Kafka and Redpanda: it holds
a consume-transform-produce copier's output to exactly-once and read_committed isolation.

The copier reads topic A (read_committed, group offsets), writes each record to the same
partition of topic B inside a transaction together with the group's offsets, and commits. Each
output value names its source and its transaction attempt, so the output describes itself:

    b"<source partition>:<source offset>|<attempt id>|<records in the attempt>"

`check` finds, on plain data:
- LOST WRITE: a source record with no copy in B (read_committed, after the copier finished);
- DUPLICATE: a source record copied more than once;
- REORDERED: B's copies of one source partition out of source order;
- ABORTED READ (G1a): a read_committed reader saw a record of an attempt the copier aborted or
  that was fenced;
- PRECOMMITTED READ: a reader saw a record before its attempt's commit was even asked for;
- TORN TRANSACTION: B holds some but not all records of one attempt;
- INCONSISTENT OFFSETS: the group's committed offset of a source partition is not one past the
  last source record copied from it.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"  # the copier died or lost the answer: either outcome is allowed


def output_value(source_partition: int, source_offset: int, attempt: str, size: int) -> bytes:
    return f"{source_partition}:{source_offset}|{attempt}|{size}".encode()


@dataclass(frozen=True)
class Copy:
    """One record of B, decoded from its value."""

    partition: int  # in B
    offset: int  # in B
    source: tuple[int, int]  # (partition, offset) in A
    attempt: str
    size: int

    @classmethod
    def parse(cls, partition: int, offset: int, value: bytes) -> Copy:
        source, attempt, size = value.decode().split("|")
        sp, so = source.split(":")
        return cls(partition, offset, (int(sp), int(so)), attempt, int(size))


@dataclass(frozen=True)
class Attempt:
    """What the copier's log says of one transaction attempt (monotonic clock times)."""

    attempt: str
    outcome: str  # COMMITTED, ABORTED or UNKNOWN
    commit_asked_at: float | None = None  # when EndTxn(commit) was first sent


@dataclass(frozen=True)
class Read:
    """A read_committed reader's sight of a record during the run."""

    copy: Copy
    at: float  # when the fetch that returned it completed


@dataclass
class TxnReport:
    source_records: int = 0
    copies: int = 0
    attempts_seen: int = 0
    concurrent_reads: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self, name: str) -> str:
        return (
            f"[fault] {name}: {self.source_records} source records, {self.copies} copies read "
            f"committed from {self.attempts_seen} transactions, {self.concurrent_reads} "
            f"records read during the faults; problems {len(self.problems)}"
        )


def _note(problems: list[str], limit: int, message: str) -> None:
    if len(problems) < limit:
        problems.append(message)
    elif len(problems) == limit:
        problems.append("... (more problems left out)")


def check_copy(
    source: Mapping[int, Iterable[int]],
    output: Iterable[Copy],
    attempts: Iterable[Attempt],
    committed_offsets: Mapping[int, int],
    reads: Iterable[Read] = (),
    limit: int = 20,
) -> TxnReport:
    """`source`: the offsets of A's records per partition; `output`: B read read_committed
    after the copier finished; `attempts`: the copier's log; `committed_offsets`: the group's
    final offsets per A partition; `reads`: what readers saw while the faults ran."""
    report = TxnReport()
    problems = report.problems
    copies = list(output)
    report.copies = len(copies)
    by_source: dict[tuple[int, int], list[Copy]] = defaultdict(list)
    for c in copies:
        by_source[c.source].append(c)
    for p, offsets in sorted(source.items()):
        for o in offsets:
            report.source_records += 1
            found = by_source.get((p, o), [])
            if not found:
                _note(problems, limit, f"LOST WRITE: A p{p}@{o} has no copy in B")
            elif len(found) > 1:
                where = [(c.partition, c.offset, c.attempt) for c in found]
                _note(problems, limit, f"DUPLICATE: A p{p}@{o} copied {len(found)}x: {where}")
    # Order: per B partition, by B offset, the sources of one A partition only grow.
    per_partition: dict[int, list[Copy]] = defaultdict(list)
    for c in copies:
        per_partition[c.partition].append(c)
    for p, cs in sorted(per_partition.items()):
        cs.sort(key=lambda c: c.offset)
        by_src: dict[int, list[Copy]] = defaultdict(list)
        for c in cs:
            by_src[c.source[0]].append(c)
        for sp, run in by_src.items():
            for a, b in itertools.pairwise(run):
                if b.source[1] <= a.source[1]:
                    _note(
                        problems,
                        limit,
                        f"REORDERED: B p{p}@{b.offset} copies A p{sp}@{b.source[1]} after "
                        f"B p{p}@{a.offset} copied A p{sp}@{a.source[1]}",
                    )
                    break
    # Torn transactions: every attempt in B is whole.
    sizes = Counter(c.attempt for c in copies)
    declared = {c.attempt: c.size for c in copies}
    report.attempts_seen = len(sizes)
    for attempt, n in sorted(sizes.items()):
        if n != declared[attempt]:
            _note(
                problems,
                limit,
                f"TORN TRANSACTION: attempt {attempt} has {n} of its {declared[attempt]} "
                "records in B",
            )
    # Isolation: no aborted attempt is ever read, none before its commit was asked.
    log = {a.attempt: a for a in attempts}
    seen = [Read(c, float("inf")) for c in copies] + list(reads)
    report.concurrent_reads = len(seen) - len(copies)
    for r in seen:
        entry = log.get(r.copy.attempt)
        label = f"B p{r.copy.partition}@{r.copy.offset} (attempt {r.copy.attempt})"
        if entry is None:
            _note(problems, limit, f"UNKNOWN ATTEMPT: {label} is not in the copier's log")
        elif entry.outcome == ABORTED:
            _note(problems, limit, f"ABORTED READ (G1a): {label} was aborted")
        elif entry.commit_asked_at is None or r.at < entry.commit_asked_at:
            if entry.commit_asked_at is None:
                _note(problems, limit, f"PRECOMMITTED READ: {label}, commit never asked")
            else:
                early = entry.commit_asked_at - r.at
                _note(problems, limit, f"PRECOMMITTED READ: {label} read {early:.3f} s early")
    # Offsets: the group's offset of each source partition is one past its last copy.
    last: dict[int, int] = {}
    for c in copies:
        last[c.source[0]] = max(last.get(c.source[0], -1), c.source[1])
    for p in sorted(set(source) | set(committed_offsets)):
        expected = last.get(p, -1) + 1
        got = committed_offsets.get(p, 0)
        if got != expected:
            _note(
                problems,
                limit,
                f"INCONSISTENT OFFSETS: A p{p} committed at {got}, copies end at {expected}",
            )
    return report
