"""The answers a consumer waits to be pushed (fetch.push.credit; decision 0019, push addendum).

A fetch answer that says more will be pushed for its partition (`push_credit` > 0, from
`push_offset`) leaves an in-flight chunk at that offset with no request behind it; the
gateway's pushed answer fills it. Only a push fetched from exactly that chunk's offset does: a
push the position moved away from (a seek, a reset, a revoke, an error, or an explicit fetch
that replaced the pushes) finds no chunk and is dropped, so it can never yield records the
position left. A chunk waiting past its deadline, or on a stream that ended, is given up and
the partition's ordinary fetch takes over.
"""

from __future__ import annotations

from riverlog.common.types import TopicPartition

from .chunk import Chunk

__all__ = ["AwaitedPushes"]


class AwaitedPushes:
    """The chunks waiting for a push, at most one per partition (consumer thread only)."""

    def __init__(self) -> None:
        self._chunks: dict[TopicPartition, tuple[Chunk, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._chunks)

    def __len__(self) -> int:
        return len(self._chunks)

    def expect(self, chunk: Chunk, deadline: float) -> None:
        """`chunk` is filled by the push fetched from its offset, if one comes by `deadline`."""
        self._chunks[chunk.tp] = (chunk, deadline)

    def waiting(self, chunk: Chunk) -> bool:
        entry = self._chunks.get(chunk.tp)
        return entry is not None and entry[0] is chunk

    def waiting_for(self, tp: TopicPartition) -> bool:
        return tp in self._chunks

    def take(self, tp: TopicPartition, fetch_offset: int, epoch: int | None) -> Chunk | None:
        """The chunk a push of `tp` fetched from `fetch_offset` fills, or None: a stale push, to
        drop. `epoch`: the partition's epoch now (None: no longer assigned)."""
        entry = self._chunks.get(tp)
        if entry is None:
            return None
        chunk = entry[0]
        if epoch is None or chunk.epoch != epoch:
            del self._chunks[tp]  # seeked or revoked since: the chunk is stale too
            return None
        if chunk.fetch_offset != fetch_offset:
            return None  # an older push of this partition: keep waiting for the right one
        del self._chunks[tp]
        return chunk

    def expired(self, now: float) -> list[Chunk]:
        """Forget and return the chunks whose push did not come by their deadline."""
        late = [chunk for chunk, deadline in self._chunks.values() if deadline <= now]
        for chunk in late:
            del self._chunks[chunk.tp]
        return late

    def drop(self, tp: TopicPartition) -> Chunk | None:
        entry = self._chunks.pop(tp, None)
        return entry[0] if entry is not None else None

    def clear(self) -> list[Chunk]:
        chunks = [chunk for chunk, _ in self._chunks.values()]
        self._chunks.clear()
        return chunks
