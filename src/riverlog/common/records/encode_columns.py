"""Encode the records of one batch from columns (timestamps, keys, values, headers) at once,
byte for byte as `BatchBuilder.append` one record at a time, with C-level loops instead of
Python-level work per record.

The producer keeps a batch's records as they were sent and encodes them when the sender builds
the batch (decision 0015): the application thread's `send` then does no encoding, and the
encoding itself runs as a handful of passes over whole columns (`map(len, ...)`, table lookups
through `operator.itemgetter`, extended-slice assignments into one list of parts, one
`bytes.join`), which costs a fraction of a Python loop. The fast path covers the common batch:
no headers, values (and keys, if any) bytes shorter than about 8 KiB, timestamps that never go
back before the first one and span less than 8 s, fewer than 8,192 records. Any other batch goes
through `BatchBuilder`, record by record, with the same result. Where the C extension is
built, a batch without headers is encoded by `_speedups.encode_columns` in one C loop (same
bytes; anything unusual is handed back to the Python paths).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, itemgetter, sub
from typing import Any, Final, TypeVar

from .varint import ENCODED, TWO_BYTE_LIMIT, encode_varint, encode_varint32

# The C loop (decision 0015's addendum): None where the extension is not built.
encode_c: Callable[[Any, Any, Any], bytes | None] | None
try:
    from ._speedups import encode_columns as _encode_columns_c

    encode_c = _encode_columns_c
except ImportError:  # pragma: no cover - built without a C compiler
    encode_c = None

_T = TypeVar("_T")

_NULL: Final = b"\x01"  # varint -1: a null key
_ZERO: Final = b"\x00"  # attributes 0, zero headers, timestamp delta 0
_EMPTY: Final = b""
_INT64_MAX: Final = (1 << 63) - 1

# POS[n]: the varint of a non-negative n < TWO_BYTE_LIMIT // 2 (zigzag 2n); POSLEN[n]: its size.
POS: Final[tuple[bytes, ...]] = ENCODED[0::2]
POSLEN: Final[tuple[int, ...]] = tuple(map(len, POS))
_LIMIT: Final = TWO_BYTE_LIMIT // 2  # 8192: the table's end
# Body bytes of a record with a null key, no headers, a 1-byte timestamp delta and a value of n
# bytes, less the offset delta: attributes + timestamp delta + null key + value length + value
# + header count.
_VALUE_BODY: Final[tuple[int, ...]] = tuple(4 + POSLEN[n] + n for n in range(_LIMIT))
# What a timestamp delta of n adds to a body, against a 1-byte one.
_DELTA_EXTRA: Final[tuple[int, ...]] = tuple(size - 1 for size in POSLEN)
# What a key of n bytes adds to a body, against a null key (whose length takes one byte).
_KEY_EXTRA: Final[tuple[int, ...]] = tuple(POSLEN[n] + n - 1 for n in range(_LIMIT))
# A body's length prefix for a value of n bytes, as above, at offset delta < 64 (1 byte) and
# at offset delta >= 64 (2 bytes): the null-key batches need no addition at all.
_PREFIX_1: Final[tuple[bytes, ...]] = tuple(
    POS[b] if b < _LIMIT else b"" for b in (v + 1 for v in _VALUE_BODY)
)
_PREFIX_2: Final[tuple[bytes, ...]] = tuple(
    POS[b] if b < _LIMIT else b"" for b in (v + 2 for v in _VALUE_BODY)
)
_MAX_FAST_VALUE: Final = max(n for n, prefix in enumerate(_PREFIX_2) if prefix)


def pick(table: Sequence[_T], indexes: Sequence[int]) -> tuple[_T, ...]:
    """`tuple(table[i] for i in indexes)`, in one C loop."""
    if len(indexes) > 1:
        return itemgetter(*indexes)(table)  # type: ignore[no-any-return]
    return (table[indexes[0]],) if indexes else ()


def encode_records(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[bytes | None],
) -> bytes:
    """The records of a batch, encoded (uncompressed, without the batch header): record i has
    `timestamps[i]` (the first one is the batch's base timestamp), `keys[i]`, `values[i]` (bytes
    or None) and `headers[i]`, its headers already encoded (`encode_headers`) or None for none.
    Raises ValueError for a timestamp a batch cannot hold (as `BatchBuilder.append`)."""
    n = len(values)
    if not n:
        return b""
    no_headers = headers.count(None) == n
    if no_headers and encode_c is not None:
        encoded = encode_c(timestamps, keys, values)
        if encoded is not None:
            return encoded
    base = timestamps[0]
    if n < _LIMIT and 0 <= base and no_headers:
        span = max(timestamps) - base
        if span < _LIMIT and min(timestamps) >= base:
            try:
                return _encode_fast(timestamps, keys, values, base, span, n)
            except (TypeError, IndexError):
                pass  # a null value, a length past the tables: the general path
    return _encode_general(timestamps, keys, values, headers)


def _encode_fast(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    base: int,
    span: int,
    n: int,
) -> bytes:
    """No headers, deltas 0..8191, n < 8192; raises TypeError (a null value, or some keys null
    and some not) or IndexError (a length past the tables) for the general path."""
    lens: tuple[int, ...] = tuple(map(len, values))  # type: ignore[arg-type]
    low = min(n, 64)
    null_keys = keys.count(None) == n
    deltas: tuple[int, ...] = ()
    if span:
        deltas = tuple(map(sub, timestamps, repeat(base, n)))
    if null_keys and span < 64:
        if max(lens) > _MAX_FAST_VALUE:
            raise IndexError("record body past the table")
        prefixes = pick(_PREFIX_1, lens[:low]) + pick(_PREFIX_2, lens[low:])
    else:
        bodies = pick(_VALUE_BODY, lens)
        if not null_keys:
            key_lens: tuple[int, ...] = tuple(map(len, keys))  # type: ignore[arg-type]
            bodies = tuple(map(add, bodies, pick(_KEY_EXTRA, key_lens)))
        if span >= 64:
            bodies = tuple(map(add, bodies, pick(_DELTA_EXTRA, deltas)))
        offset_extra = ((1,) * low) + ((2,) * (n - low))
        prefixes = pick(POS, tuple(map(add, bodies, offset_extra)))
    width = 8 if null_keys else 9
    # Each record: length, attributes, timestamp delta, offset delta, key (length, bytes),
    # value (length, bytes), header count; the parts left at _ZERO are the zero bytes.
    parts: list[bytes | None] = [_ZERO] * (width * n)
    parts[0::width] = prefixes
    if span:
        parts[2::width] = pick(POS, deltas)
    parts[3::width] = POS[:n]
    if null_keys:
        parts[4::width] = (_NULL,) * n
        parts[5::width] = pick(POS, lens)
        parts[6::width] = values
    else:
        parts[4::width] = pick(POS, key_lens)
        parts[5::width] = keys
        parts[6::width] = pick(POS, lens)
        parts[7::width] = values
    return b"".join(parts)  # type: ignore[arg-type]


def _encode_general(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[bytes | None],
) -> bytes:
    """Record by record, as `BatchBuilder.append` (with its checks)."""
    base = timestamps[0]
    if not -1 <= base <= _INT64_MAX:
        raise ValueError(f"invalid timestamp {base}")
    parts: list[bytes] = []
    for offset, (timestamp, key, value, encoded_headers) in enumerate(
        zip(timestamps, keys, values, headers, strict=True)
    ):
        if timestamp < -1:
            raise ValueError(f"invalid timestamp {timestamp}")
        tpart = encode_varint(timestamp - base)
        opart = encode_varint32(offset)
        kpart = _NULL if key is None else encode_varint32(len(key))
        vpart = _NULL if value is None else encode_varint32(len(value))
        key = key or _EMPTY
        value = value or _EMPTY
        hpart = encoded_headers or _ZERO
        body = 1 + len(tpart) + len(opart) + len(kpart) + len(key) + len(vpart) + len(value)
        body += len(hpart)
        parts += (encode_varint32(body), _ZERO, tpart, opart, kpart, key, vpart, value, hpart)
    return b"".join(parts)
