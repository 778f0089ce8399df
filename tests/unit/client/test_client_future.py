"""RecordFuture over a shared BatchResult: metadata per record from the batch's base offset and
the built batch's per-record columns, errors, timeouts, callbacks before and after completion, a
first-completion-wins rule, and RecordFutures (send_many's one result for many records)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import riverlog
from riverlog.client import ClientTimeoutError, RecordMetadata, RiverlogError
from riverlog.client.producer.future import (
    BatchResult,
    RecordFuture,
    RecordFutures,
    delivery_callback,
    new_future,
)
from riverlog.common.errors import ErrorCode


def test_metadata_from_the_batch() -> None:
    result = BatchResult("t", 2)
    result.set_records([1000, 1001, 1002], [b"k", b"k", b"k"], [b"v" * 5] * 3)
    futures = [new_future(result, i) for i in range(3)]
    assert not futures[0].done() and futures[0].metadata() is None
    assert result.complete(40, -1, None)
    assert futures[2].result(0) == RecordMetadata("t", 2, 42, 1002, 1, 5)
    assert futures[1].get() == futures[1].result()
    assert futures[0].exception() is None


def test_log_append_time_replaces_the_timestamp() -> None:
    result = BatchResult("t", 0)
    result.set_records([1000], [None], [None])
    future = new_future(result, 0)
    assert future.metadata() is None  # pending
    result.complete(0, 5555, None)
    assert future.result() == RecordMetadata("t", 0, 0, 5555, -1, -1)
    assert future.result().timestamp == 5555


def test_errors_and_timeouts() -> None:
    result = BatchResult("t", 0)
    future = new_future(result, 0)
    with pytest.raises(ClientTimeoutError):
        future.result(timeout=0.01)
    error = RiverlogError(None, ErrorCode.INVALID_RECORD)
    result.complete(-1, -1, error)
    assert not result.complete(7, -1, None)  # the first outcome stays
    with pytest.raises(RiverlogError) as info:
        future.result()
    assert info.value is error and future.exception() is error
    assert not future.cancel() and not future.cancelled()


def test_callbacks_before_and_after() -> None:
    result = BatchResult("t", 0)
    future = new_future(result, 0)
    calls: list[tuple[object, object]] = []
    future.add_done_callback(delivery_callback(lambda m, e: calls.append((m, e))))
    assert calls == []
    result.complete(9, -1, None)
    future.add_done_callback(delivery_callback(lambda m, e: calls.append((m, e))))
    assert [c[0].offset for c in calls] == [9, 9]  # type: ignore[attr-defined]
    assert "done" in repr(future)


def test_futures_of_many_records_by_runs() -> None:
    first, second = BatchResult("t", 0), BatchResult("t", 1)
    first.set_records([7, 7], [None, None], [b"a", b"bb"])
    second.set_records([5, 7, 7, 7], [b"k"] * 4, [b"x", None, b"c", b"dd"])
    futures = RecordFutures()
    futures.add_run(first, 0, 2)
    futures.add_run(second, 2, 2)  # records 2 and 3 of the second batch
    assert len(futures) == 4 and not futures.done()
    with pytest.raises(ClientTimeoutError):
        futures.result(timeout=0.01)
    first.complete(10, -1, None)
    second.complete(20, -1, None)
    metas = futures.result(1)
    assert [(m.partition, m.offset, m.serialized_value_size) for m in metas] == [
        (0, 10, 1),
        (0, 11, 2),
        (1, 22, 1),
        (1, 23, 2),
    ]
    assert futures[3].result() == metas[3] and futures[-4].result() == metas[0]
    assert [f.result() for f in futures] == metas
    with pytest.raises(IndexError):
        futures[4]


def test_many_records_raise_the_first_error() -> None:
    ok, bad = BatchResult("t", 0), BatchResult("t", 0)
    futures = RecordFutures()
    futures.add_run(ok, 0, 1)
    futures.add_run(bad, 0, 1)
    error = RiverlogError(None, ErrorCode.INVALID_RECORD)
    ok.complete(0, -1, None)
    bad.complete(-1, -1, error)
    assert futures.done() and futures.exception() is error
    with pytest.raises(RiverlogError):
        futures.result()
    assert futures[0].exception() is None and futures[1].exception() is error


def test_a_future_is_a_pair_read_as_result_and_index_with_or_without_the_extension() -> None:
    """With the C extension a RecordFuture's base is `_speedups.FuturePair` (its items read
    as ._result/._index like slots, and only 2-tuples can be made); without it, properties."""
    code = (
        "import sys\n"
        "if sys.argv[1] == 'python':\n"
        "    sys.modules['riverlog.common.records._speedups'] = None\n"
        "from riverlog.client.producer.future import RecordFuture\n"
        "f = RecordFuture(('r', 3))\n"
        "assert (f._result, f._index, f[0], f[1], len(f)) == ('r', 3, 'r', 3, 2)\n"
        "try:\n"
        "    f._result = 1\n"
        "    raise SystemExit('writable')\n"
        "except AttributeError:\n"
        "    pass\n"
        "print(type(f).__mro__[1].__name__)\n"
    )
    for mode, base in (("c", "FuturePair"), ("python", "tuple")):
        out = subprocess.run(
            [sys.executable, "-c", code, mode],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(riverlog.__file__).parents[1])},
        )
        assert out.returncode == 0, out.stderr
        if mode == "python" or future_module_compiled():
            assert out.stdout.strip() == base
    if future_module_compiled():
        with pytest.raises(TypeError):
            RecordFuture(())  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            tuple.__new__(RecordFuture, ())


def future_module_compiled() -> bool:
    return RecordFuture.__mro__[1] is not tuple
