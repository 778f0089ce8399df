"""The transactions checker must catch each violation it claims to (a checker that passes
everything would make the transactions fault test green): one clean copy history, then one
history per anomaly (lost write, duplicate, reorder, aborted read, precommitted read, torn
transaction, inconsistent offsets)."""

from __future__ import annotations

import pytest
from txn_checker import ABORTED, COMMITTED, UNKNOWN, Attempt, Copy, Read, check_copy, output_value

pytestmark = pytest.mark.timeout(30)

SOURCE = {0: [0, 1, 2], 1: [0, 1]}


def copy(b_partition: int, b_offset: int, src: tuple[int, int], attempt: str, size: int) -> Copy:
    return Copy.parse(b_partition, b_offset, output_value(*src, attempt, size))


def clean() -> tuple[list[Copy], list[Attempt], dict[int, int]]:
    # t1 copies A p0@0-1 and p1@0 (3 records over two partitions); t2 aborted; t3 the rest.
    output = [
        copy(0, 0, (0, 0), "t1", 3),
        copy(0, 1, (0, 1), "t1", 3),
        copy(1, 0, (1, 0), "t1", 3),
        copy(0, 5, (0, 2), "t3", 2),
        copy(1, 4, (1, 1), "t3", 2),
    ]
    attempts = [
        Attempt("t1", COMMITTED, 10.0),
        Attempt("t2", ABORTED),
        Attempt("t3", UNKNOWN, 20.0),  # the copier died after asking: it committed
    ]
    return output, attempts, {0: 3, 1: 2}


def problems(**changes) -> list[str]:
    output, attempts, offsets = clean()
    args = {"output": output, "attempts": attempts, "committed_offsets": offsets, **changes}
    return check_copy(SOURCE, **args).problems


def test_a_clean_history_passes() -> None:
    output, attempts, offsets = clean()
    reads = [Read(output[0], 10.5)]
    report = check_copy(SOURCE, output, attempts, offsets, reads)
    assert report.problems == []
    assert (report.source_records, report.copies, report.attempts_seen) == (5, 5, 2)


def test_a_lost_write() -> None:
    output, _, _ = clean()
    found = problems(output=output[:3], committed_offsets={0: 2, 1: 1})
    assert [p.split(":")[0] for p in found] == ["LOST WRITE", "LOST WRITE"]


def test_a_duplicate() -> None:
    output, attempts, _ = clean()
    dup = [*output, copy(0, 7, (0, 2), "t4", 1)]
    found = problems(output=dup, attempts=[*attempts, Attempt("t4", COMMITTED, 30.0)])
    assert found[0].startswith("DUPLICATE: A p0@2")
    assert [p.split(":")[0] for p in found[1:]] == ["REORDERED"]  # p0's sources went back


def test_a_reorder() -> None:
    output, _, _ = clean()
    swapped = [copy(0, 0, (0, 1), "t1", 3), copy(0, 1, (0, 0), "t1", 3), *output[2:]]
    found = problems(output=swapped)
    assert len(found) == 1 and found[0].startswith("REORDERED")


def test_an_aborted_read_during_the_run() -> None:
    output, attempts, offsets = clean()
    ghost = copy(0, 2, (0, 2), "t2", 1)
    found = check_copy(SOURCE, output, attempts, offsets, [Read(ghost, 15.0)]).problems
    assert len(found) == 1 and found[0].startswith("ABORTED READ (G1a)")


def test_a_precommitted_read() -> None:
    output, attempts, offsets = clean()
    found = check_copy(SOURCE, output, attempts, offsets, [Read(output[3], 19.0)]).problems
    assert len(found) == 1 and found[0].startswith("PRECOMMITTED READ")


def test_a_torn_transaction() -> None:
    output, _, _ = clean()
    found = problems(output=[o for o in output if o.offset != 1], committed_offsets={0: 3, 1: 2})
    kinds = sorted(p.split(":")[0] for p in found)
    assert kinds == ["LOST WRITE", "TORN TRANSACTION"]


def test_inconsistent_offsets() -> None:
    found = problems(committed_offsets={0: 2, 1: 2})
    assert len(found) == 1 and found[0].startswith("INCONSISTENT OFFSETS: A p0 committed at 2")


def test_an_attempt_missing_from_the_log() -> None:
    _, attempts, _ = clean()
    found = problems(attempts=attempts[:2])
    assert {p.split(":")[0] for p in found} == {"UNKNOWN ATTEMPT"}
