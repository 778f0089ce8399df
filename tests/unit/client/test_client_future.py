"""RecordFuture over a shared BatchResult: metadata per record from the batch's base offset,
errors, timeouts, callbacks before and after completion, and a first-completion-wins rule."""

from __future__ import annotations

import pytest

from riverlog.client import ClientTimeoutError, RecordMetadata, RiverlogError
from riverlog.client.producer.future import BatchResult, RecordFuture, delivery_callback
from riverlog.common.errors import ErrorCode


def test_metadata_from_the_batch() -> None:
    result = BatchResult("t", 2)
    futures = [RecordFuture(result, i, 1000 + i, 1, 5) for i in range(3)]
    assert not futures[0].done() and futures[0].metadata() is None
    assert result.complete(40, -1, None)
    assert futures[2].result(0) == RecordMetadata("t", 2, 42, 1002, 1, 5)
    assert futures[1].get() == futures[1].result()
    assert futures[0].exception() is None


def test_log_append_time_replaces_the_timestamp() -> None:
    result = BatchResult("t", 0)
    future = RecordFuture(result, 0, 1000, -1, -1)
    result.complete(0, 5555, None)
    assert future.result().timestamp == 5555


def test_errors_and_timeouts() -> None:
    result = BatchResult("t", 0)
    future = RecordFuture(result, 0, 0, -1, -1)
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
    future = RecordFuture(result, 0, 0, -1, -1)
    calls: list[tuple[object, object]] = []
    future.add_done_callback(delivery_callback(lambda m, e: calls.append((m, e))))
    assert calls == []
    result.complete(9, -1, None)
    future.add_done_callback(delivery_callback(lambda m, e: calls.append((m, e))))
    assert [c[0].offset for c in calls] == [9, 9]  # type: ignore[attr-defined]
    assert "done" in repr(future)
