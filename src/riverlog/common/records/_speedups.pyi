"""Types of the optional C extension (`_speedups.c`): the record loop of one batch, and the
producer's per-record append."""

from typing import Any

def decode_into(
    buf: bytes | bytearray,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[tuple[str, bytes | None]]],
    /,
) -> int: ...
def rows_into(
    buf: bytes | bytearray,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    row_type: type[Any],
    topic: str,
    partition: int,
    ts_type: int,
    fixed_ts: int | None,
    out: list[Any],
    /,
) -> int: ...
def wire_into(
    buf: bytes | bytearray,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    ts_type: int,
    fixed_ts: int | None,
    limit: int,
    out: bytearray,
    /,
) -> tuple[int, int]: ...
def encode_columns(timestamps: Any, keys: Any, values: Any) -> bytes | None: ...

class FuturePair(tuple[Any, int]):
    """A (result, index) 2-tuple read as ._result and ._index."""

    _result: Any
    _index: int

class Appender:
    """The producer's per-record append to a topic's sticky batch (decision 0015's addendum)."""

    def __init__(
        self,
        lock: Any,
        sticky: dict[str, Any],
        available: int,
        batch_type: type[Any],
        future_type: type[tuple[Any, ...]],
        record_overhead: int,
        record_memory: int,
        /,
    ) -> None: ...
    def __call__(
        self, topic: str, timestamp: int, key: bytes | None, value: bytes | None, /
    ) -> Any: ...
    available: int  # buffer.memory's free bytes

class SendFast:
    """Producer.send's common case in C; every other call to the Python send."""

    def __init__(
        self,
        appender: Appender,
        topics: dict[str, Any],
        send: Any,
        max_record: int,
        ignore_keys: bool,
        /,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
