"""Leaders' long polls a fetch stopped waiting for, kept so that the same client's next fetch
joins them instead of parking a second poll beside them (decision 0018, addendum of session 5).

A multi-leader fetch answers once min_bytes is met across its leaders; the leaders still
waiting are answered empty and their calls run on (`fetch._LongPoll`). Such a call is parked
here under the exact request it sent (`PollKey`): who asked, the node, and each partition with
its fetch offset. A consumer whose partitions were answered empty asks again for the same
offsets, so its next fetch to that node finds the call and takes it: still running, it waits on
it (no second poll on the leader); answered, it gets those records at once (no second read).
Anything else (another client or connection, a seek, a rebalance that changed the partitions,
another isolation level or size, a leader epoch the gateway's metadata moved since the call
was sent: the new leader's log may be shorter than the answer) is another key and never sees
the call, which then finishes
unseen and its answer is dropped. Nothing is charged for a dropped answer: the fetch quota is
charged by the servicer on the records a response carries, and a dropped answer is in none.

Pure bookkeeping over opaque handles (the calls), on an explicit millisecond clock, with two
states per entry:

- RUNNING: the leader has not answered; `answered` moves it to READY (records came back) or
  removes it (empty answer or failure: nothing worth joining, the next fetch asks afresh);
- READY: records nobody took yet, kept `keep_ms` (the poll's own wait) and then dropped.

`take` removes the entry whatever its state; the taker puts a RUNNING call back (`park`) if it
stops waiting for it in turn. An entry is only ever changed through its own handle, so a late
callback of a call that was taken, replaced or evicted changes nothing. The table is bounded:
past `max_entries` the oldest entry goes, past `max_bytes` of READY answers the oldest READY
ones go (a dropped entry's call still finishes on its connection; it is only no longer
joinable).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from riverlog.common.cluster.image import NodeKey
from riverlog.common.types import TopicPartition

H = TypeVar("H")

DEFAULT_MAX_ENTRIES = 4096
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PollKey:
    """One leader request as sent, without its wait (max_wait, min_bytes): what an answer
    depends on. Two keys are equal only for the same caller, node, isolation level, sizes and
    partitions at the same offsets and leader epochs (the client's and the gateway's), in the
    same order."""

    caller: tuple[str, str, str]
    """(principal, client id, peer address): one client connection (a stream's requests share
    their call's). Two consumers never share a key, even with one client id."""
    node: NodeKey
    address: str
    isolation_level: int | None
    rack_id: str
    max_bytes: int
    parts: tuple[tuple[TopicPartition, int, int, int | None], ...]
    """(partition, fetch offset, partition max bytes, current leader epoch) each."""
    leader_epochs: tuple[int, ...] = ()
    """The leader epoch the gateway's metadata gave each partition when the call was sent: an
    answer from before a leader change (whose log may have been truncated since, up to the
    answer's own records) is not joined once the metadata shows the new epoch."""


class PollState(enum.Enum):
    RUNNING = "running"
    READY = "ready"


@dataclass(slots=True)
class PendingPoll(Generic[H]):
    handle: H
    state: PollState
    size: int = 0
    """READY: the record bytes of the answer."""
    expires_ms: int = 0
    """READY: when it is dropped untaken."""


class PendingPolls(Generic[H]):
    """The table of one gateway (the Fetcher's). Only the event loop calls it."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[PollKey, PendingPoll[H]] = OrderedDict()  # oldest first
        self._bytes = 0  # of the READY entries
        self._next_expiry: int | None = None  # the earliest READY entry's, None: none
        self.joined = 0
        """Entries taken by a later fetch (for tests and debugging)."""
        self.dropped = 0
        """READY answers dropped untaken (expired, replaced or evicted)."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def state(self, key: PollKey) -> PollState | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.state

    def park(self, key: PollKey, handle: H, now_ms: int) -> None:
        """A call nobody waits for any more, RUNNING under `key` (replacing what was there:
        the same request sent again while it ran, whose own call then finishes unseen)."""
        self.expire(now_ms)
        self._remove(key)
        self._entries[key] = PendingPoll(handle, PollState.RUNNING)
        while len(self._entries) > self.max_entries:
            self._remove(next(iter(self._entries)))

    def answered(self, key: PollKey, handle: H, size: int, keep_ms: int, now_ms: int) -> None:
        """`handle`'s call finished with `size` record bytes (0: empty or failed). With
        records it becomes READY until `keep_ms` from now; else it is removed. Nothing
        happens unless `handle` is the RUNNING entry of `key`."""
        entry = self._entries.get(key)
        if entry is None or entry.handle is not handle or entry.state is not PollState.RUNNING:
            return
        if size <= 0 or keep_ms <= 0:
            self._remove(key)
            return
        entry.state = PollState.READY
        entry.size = size
        entry.expires_ms = now_ms + keep_ms
        self._bytes += size
        if self._next_expiry is None or entry.expires_ms < self._next_expiry:
            self._next_expiry = entry.expires_ms
        self.expire(now_ms)
        while self._bytes > self.max_bytes:
            oldest = next(k for k, e in self._entries.items() if e.state is PollState.READY)
            self._remove(oldest)

    def take(self, key: PollKey, now_ms: int) -> PendingPoll[H] | None:
        """The entry of `key`, removed from the table (None: nothing to join)."""
        self.expire(now_ms)
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        if entry.state is PollState.READY:
            self._bytes -= entry.size
        self.joined += 1
        return entry

    def expire(self, now_ms: int) -> None:
        """Drop the READY answers whose time is up (a look at every entry only when one is
        due)."""
        if self._next_expiry is None or now_ms < self._next_expiry:
            return
        ready = [(k, e) for k, e in self._entries.items() if e.state is PollState.READY]
        for key, entry in ready:
            if entry.expires_ms <= now_ms:
                self._remove(key)
        self._next_expiry = min(
            (e.expires_ms for _, e in ready if e.expires_ms > now_ms), default=None
        )

    def _remove(self, key: PollKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.state is PollState.READY:
            self._bytes -= entry.size
            self.dropped += 1
