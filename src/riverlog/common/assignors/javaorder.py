"""Java's string order and `java.util.HashMap` iteration order, emulated.

Kafka's assignors are deterministic Java, but some of their decisions follow the iteration order
of a `HashMap` or `HashSet`: which members the sticky assignor lets keep `maxQuota` partitions,
which previous owner wins a tie, which partition a reverse movement picks. To hand out exactly
the partitions Kafka would, we replay those orders instead of using Python's insertion order.

A `HashMap` (and the `HashSet` built on it) iterates its table bucket by bucket; a key's bucket
is `(h ^ (h >>> 16)) & (capacity - 1)` where `h` is the key's `hashCode()`; inside a bucket,
entries keep insertion order (resizes split buckets without reordering them). The table starts
at 16 buckets and doubles when the size passes 3/4 of the capacity, or when one bucket reaches
9 entries while the table is smaller than 64. The one case not replayed is a bucket of 9+
entries in a table of 64+, which Java turns into a tree with its own order (vanishingly rare for
member ids and partitions).

`String.compareTo` compares UTF-16 code units, which differs from Python's code-point order for
characters above U+FFFF; `java_str_key` gives the Java order.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from riverlog.common.types import TopicPartition

K = TypeVar("K", bound=Hashable)

_MASK = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_TREEIFY_BIN_SIZE = 9  # a bucket this long is treeified (or the table resized below 64)
_MIN_TREEIFY_CAPACITY = 64


def java_str_key(s: str) -> bytes:
    """A sort key giving Java's `String.compareTo` order (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


@functools.lru_cache(maxsize=65536)
def java_string_hash(s: str) -> int:
    """`String.hashCode()` as an unsigned 32-bit value."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK
    return h


def topic_partition_hash(tp: TopicPartition) -> int:
    """Kafka's `TopicPartition.hashCode()`: `31 * (31 + partition) + topic.hashCode()`."""
    return (31 * ((31 + tp.partition) & _MASK) + java_string_hash(tp.topic)) & _MASK


def _bucket(h: int, capacity: int) -> int:
    return (h ^ (h >> 16)) & (capacity - 1)


class JavaHashSet(Generic[K]):
    """The keys of a `java.util.HashSet` (or a `HashMap`'s key set) in Java's iteration order.

    Only the order is modelled: `add` and `discard` replay Java's table growth so that
    iteration and `first()` yield what Java's iterator would. Single-threaded, like the
    assignors that use it.
    """

    __slots__ = ("_bins", "_capacity", "_entries", "_hash", "_seq")

    def __init__(self, hash_fn: Callable[[K], int], keys: Iterable[K] = ()) -> None:
        self._hash = hash_fn
        self._capacity = _DEFAULT_CAPACITY
        self._seq = itertools.count()
        self._entries: dict[K, tuple[int, int]] = {}  # key -> (hash, insertion sequence)
        self._bins: Counter[int] = Counter()
        for key in keys:
            self.add(key)

    def add(self, key: K) -> None:
        if key in self._entries:
            return  # an existing key keeps its place
        h = self._hash(key)
        self._entries[key] = (h, next(self._seq))
        b = _bucket(h, self._capacity)
        self._bins[b] += 1
        if self._bins[b] >= _TREEIFY_BIN_SIZE and self._capacity < _MIN_TREEIFY_CAPACITY:
            self._resize()
        if len(self._entries) > self._capacity * 3 // 4:
            self._resize()

    def discard(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bins[_bucket(entry[0], self._capacity)] -= 1

    def _resize(self) -> None:
        self._capacity *= 2
        self._bins = Counter(_bucket(h, self._capacity) for h, _ in self._entries.values())

    def _order_key(self, key: K) -> tuple[int, int]:
        h, seq = self._entries[key]
        return (_bucket(h, self._capacity), seq)

    def first(self) -> K:
        """What `iterator().next()` returns; raises `KeyError` when empty."""
        if not self._entries:
            raise KeyError("first() of an empty JavaHashSet")
        return min(self._entries, key=self._order_key)

    def __iter__(self) -> Iterator[K]:
        return iter(sorted(self._entries, key=self._order_key))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def java_hash_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a fresh `HashMap<String, ?>` after putting `keys` in order.

    This is the order Kafka's consumer leader sees its group's subscriptions in: it puts the
    JoinGroup members into a new `HashMap` keyed by member id.
    """
    return list(JavaHashSet(java_string_hash, keys))
