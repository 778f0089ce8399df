"""The checker must catch each violation it claims to: a checker that passes everything would
make every fault test green. Synthetic histories, no cluster: one clean history, then one
history per kind of violation (lost, duplicated, misplaced, reordered, diverged replicas, a
record seen above the high watermark, a record seen and later truncated)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from checker import check, unavailability
from observers import HighWatermarkWatcher, Seen
from workload import Ack, record_id

RUN = b"r1"


def value(producer: int, seq: int) -> bytes:
    return b"%s|%d|%d|xxxx" % (RUN, producer, seq)


@dataclass
class FakeWorkload:
    acks: list[Ack] = field(default_factory=list)
    fault_at: float | None = None


def ack(producer: int, seq: int, partition: int, offset: int, sent=0.0, acked=0.0) -> Ack:
    return Ack(record_id(value(producer, seq)), producer, seq, partition, offset, sent, acked)


def history():
    """Producer 0 wrote seq 0..3 to partition 0 at offsets 0..3, all acknowledged; three
    replicas agree; a concurrent consumer saw offsets 0..1 with HW 2."""
    workload = FakeWorkload([ack(0, s, 0, s) for s in range(4)])
    read = {0: [(s, value(0, s)) for s in range(4)]}
    replicas = {0: {n: {s: value(0, s) for s in range(4)} for n in (1, 2, 3)}}
    watcher = HighWatermarkWatcher.__new__(HighWatermarkWatcher)
    watcher.seen = [Seen(0, s, value(0, s), 2) for s in range(2)]
    return workload, read, replicas, watcher


def test_a_clean_history_passes():
    workload, read, replicas, watcher = history()
    report = check(workload, read, replicas, watcher)
    assert report.problems == []
    assert (report.acked, report.read, report.replicas_compared) == (4, 4, 12)


def test_lost_record():
    workload, read, replicas, watcher = history()
    read[0].pop(2)
    problems = check(workload, read, replicas, watcher).problems
    assert any(p.startswith("LOST") for p in problems)
    report = check(workload, read, {}, None, allow_loss=True)
    assert report.problems == [] and len(report.lost) == 1


def test_duplicate_and_misplaced_records():
    workload, read, _, _ = history()
    read[0].append((4, value(0, 1)))
    assert any(p.startswith("DUPLICATE") for p in check(workload, read, {}).problems)
    workload, read, _, _ = history()
    read[0][3] = (3, value(0, 2))
    read[0][2] = (2, value(0, 3))
    problems = check(workload, read, {}).problems
    assert any(p.startswith("MISPLACED") for p in problems)


def test_earlier_copies_of_a_retried_record_are_allowed_only_without_idempotence():
    # seq 0's first attempt was written at offset 0 and its answer lost; the retry was acked at 1
    workload = FakeWorkload([ack(0, 0, 0, 1), ack(0, 1, 0, 2)])
    read = {0: [(0, value(0, 0)), (1, value(0, 0)), (2, value(0, 1))]}
    assert any(p.startswith("DUPLICATE") for p in check(workload, read, {}).problems)
    report = check(workload, read, {}, allow_duplicates=True)
    assert report.problems == [] and report.retried_copies == 1
    read[0].append((3, value(0, 0)))  # a copy above the acknowledged offset is still wrong
    problems = check(workload, read, {}, allow_duplicates=True).problems
    assert any(p.startswith("DUPLICATE") for p in problems)


def test_reordered_records():
    workload = FakeWorkload([ack(0, 0, 0, 1), ack(0, 1, 0, 0)])
    read = {0: [(0, value(0, 1)), (1, value(0, 0))]}
    assert any(p.startswith("REORDERED") for p in check(workload, read, {}).problems)


def test_diverged_or_unconverged_replicas():
    workload, read, replicas, _ = history()
    replicas[0][3][3] = value(9, 9)
    problems = check(workload, read, replicas).problems
    assert any(p.startswith("DIVERGED") for p in problems)
    workload, read, replicas, _ = history()
    del replicas[0][2][3]
    assert any(p.startswith("NOT CONVERGED") for p in check(workload, read, replicas).problems)


@pytest.mark.parametrize("kind", ["above-hw", "truncated"])
def test_what_a_concurrent_consumer_saw(kind):
    workload, read, replicas, watcher = history()
    if kind == "above-hw":
        watcher.seen.append(Seen(0, 2, value(0, 2), 2))
        expected = "ABOVE HW"
    else:
        watcher.seen.append(Seen(0, 1, value(7, 7), 3))
        expected = "TRUNCATED AFTER READ"
    problems = check(workload, read, replicas, watcher).problems
    assert any(p.startswith(expected) for p in problems), problems


def test_unavailability_counts_only_records_sent_after_the_fault():
    acks = [ack(0, 0, 0, 0, sent=9.0, acked=10.5), ack(0, 1, 0, 1, sent=10.2, acked=13.0)]
    assert unavailability(acks, 10.0, [0, 1]) == {0: pytest.approx(3.0), 1: None}


def test_leader_epochs_only_grow_with_one_leader_each():
    from checker import check_leader_epochs
    from observers import LeaderSample

    good = [LeaderSample(0, 0, 1, 0), LeaderSample(1, 0, -1, 0), LeaderSample(2, 0, 2, 1)]
    assert check_leader_epochs(good) == []
    back = [*good, LeaderSample(3, 0, 1, 0)]
    assert any(p.startswith("EPOCH WENT BACK") for p in check_leader_epochs(back))
    split = [LeaderSample(0, 0, 1, 3), LeaderSample(1, 0, 2, 3)]
    assert any(p.startswith("TWO LEADERS") for p in check_leader_epochs(split))


def test_replicas_must_match_byte_for_byte():
    from checker import check_bytes
    from observers import batch_bytes

    batch = (0).to_bytes(8, "big") + (4).to_bytes(4, "big") + b"abcd"
    assert batch_bytes(batch + batch[:7]) == [batch]  # a torn tail is left out
    compared, problems = check_bytes({0: {1: batch, 2: batch, 3: batch}})
    assert (compared, problems) == (48, [])
    _, problems = check_bytes({0: {1: batch, 2: batch[:-1] + b"x"}})
    assert problems and problems[0].startswith("BYTES DIFFER")
