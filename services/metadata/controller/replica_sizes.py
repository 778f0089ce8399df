"""Replica sizes reported by storage nodes in their heartbeats, for the replica balancer's disk
goal and its "copy fewer bytes first" preference (decision 0025).

A heartbeat may reach any metadata instance, so the sizes go to etcd, one key per storage node
under the node's lease (gone with the node). They live beside the cluster's tree, under
`<prefix minus its slash>-replica-sizes/`, not in it: every write under the prefix is a new
image version that every process receives, and sizes change all the time while nothing but the
balancer reads them. A node sends them every `REPLICA_SIZES_S` at most.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from riverlog.common.types import TopicPartition

from ..store import EtcdStore, Op


def sizes_prefix(prefix: str) -> str:
    """The sizes' own prefix beside the cluster's: "/riverlog/" → "/riverlog-replica-sizes/"."""
    return f"{prefix.rstrip('/')}-replica-sizes/"


def encode(sizes: Mapping[TopicPartition, int]) -> bytes:
    rows = [[tp.topic, tp.partition, size] for tp, size in sorted(sizes.items())]
    return json.dumps(rows, separators=(",", ":")).encode()


def decode(raw: bytes) -> dict[TopicPartition, int]:
    return {TopicPartition(str(t), int(p)): int(s) for t, p, s in json.loads(raw)}


class ReplicaSizeBook:
    """Reads and writes the sizes; stateless, safe from any task of the loop."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store

    def _key(self, node_id: int) -> str:
        return f"{self.store.keys.prefix}storage/{node_id}"

    async def record(
        self, node_id: int, lease_id: int, sizes: Mapping[TopicPartition, int]
    ) -> None:
        """Replace the node's sizes (under its lease: they go when it does)."""
        await self.store.txn([], [Op(self._key(node_id), encode(sizes), lease_id)])

    async def read(self) -> dict[int, dict[TopicPartition, int]]:
        """Storage node → its replicas' sizes, for every node that reported."""
        _, entries = await self.store.read_all()
        out: dict[int, dict[TopicPartition, int]] = {}
        for key, entry in entries.items():
            node = key.rsplit("/", 1)[-1]
            try:
                out[int(node)] = decode(entry.value)
            except (ValueError, TypeError):
                continue  # a malformed report counts as none
        return out
