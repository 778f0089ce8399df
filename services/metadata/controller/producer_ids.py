"""Producer id blocks, after Kafka's `ProducerIdControlManager`: a storage node (or any
registered node handing out producer ids) asks for a block of `BLOCK_SIZE` ids at a time, and
the controller advances `producer_ids/next_block` in etcd with one fenced transaction that
also compares the key's revision, so no two blocks ever overlap, across controller failovers
included. Ids are never reused: a block handed to a node that then dies is simply lost, as in
Kafka.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

from ..image import MetadataImage
from ..store import Compare, Op
from .election import ControllerElection

log = logging.getLogger(__name__)

BLOCK_SIZE: Final = 1000
MAX_PRODUCER_ID: Final = 2**63 - 1
_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids `start` .. `start + length - 1`, owned by `node_id`."""

    node_id: int
    start: int
    length: int


def encode_next(next_producer_id: int, node_id: int) -> bytes:
    return json.dumps(
        {"next_producer_id": next_producer_id, "node_id": node_id},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def decode_next(raw: bytes) -> int:
    value = json.loads(raw)
    return int(value["next_producer_id"])


def next_block(current_next: int, node_id: int, size: int = BLOCK_SIZE) -> ProducerIdBlock:
    """The block after `current_next`; UNKNOWN_SERVER_ERROR when the id space is exhausted."""
    if current_next < 0 or current_next > MAX_PRODUCER_ID - size:
        raise RiverlogError(
            f"producer ids are exhausted (next {current_next})", ErrorCode.UNKNOWN_SERVER_ERROR
        )
    return ProducerIdBlock(node_id, current_next, size)


class ProducerIdManager:
    """Hands out blocks on the controller. Called from RPC handlers on the event loop."""

    def __init__(self, election: ControllerElection, image: MetadataImage) -> None:
        self.election = election
        self.image = image
        self.key = image.keys.producer_ids_next_block

    def check_sender(self, node_id: int, incarnation: int) -> None:
        """The caller must be a registered node (of any kind) with that id, and of that
        incarnation when one is given: a zombie gets STALE_BROKER_EPOCH."""
        for node in self.image.cluster.nodes.values():
            if node.node_id == node_id and (not incarnation or node.incarnation == incarnation):
                return
        raise RiverlogError(
            f"node {node_id} (incarnation {incarnation}) is not registered",
            ErrorCode.STALE_BROKER_EPOCH,
        )

    async def allocate(self, node_id: int, incarnation: int) -> ProducerIdBlock:
        if not self.election.is_controller:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)
        self.check_sender(node_id, incarnation)
        for _ in range(_ATTEMPTS):
            entry = await self.image.store.get(self.key)
            current = decode_next(entry.value) if entry is not None else 0
            block = next_block(current, node_id)
            compare = Compare(self.key, entry.mod_revision if entry is not None else 0)
            put = Op(self.key, encode_next(block.start + block.length, node_id))
            if await self.election.write([compare], [put]) is not None:
                log.info(
                    "producer ids %d..%d to node %d",
                    block.start,
                    block.start + block.length - 1,
                    node_id,
                )
                return block
        raise RiverlogError(
            "producer id allocation keeps racing; retry", ErrorCode.REQUEST_TIMED_OUT
        )
