"""Dynamic storage-node configs on the controller (Kafka's IncrementalAlterConfigs on BROKER
resources): validate the incremental ops of each node entity, then write the entity's key in
one fenced transaction (`ControllerElection.write`), compared with the revision the decision
read. The image carries the result to every storage node on its Watch stream.

Each entity is handled on its own and gets its own result; a rejected entity changes nothing.
An entity left with no config is deleted, so the image lists only entities with something set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from riverlog.common import node_config
from riverlog.common.errors import ERRORS, ErrorCode, RiverlogError

from ..image import MetadataImage
from ..records import node_configs_decode, node_configs_encode
from ..store import Compare, Op
from .election import ControllerElection
from .topic_validation import ConfigOp, apply_ops, duplicates
from .topics import TopicResult

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5


def apply_node_config_ops(current: Mapping[str, str], ops: Sequence[ConfigOp]) -> dict[str, str]:
    """The entity's configs after incremental `ops`; raises INVALID_CONFIG (unknown name, bad
    value) or INVALID_REQUEST (a name twice, an unknown operation). Pure."""
    return apply_ops(current, ops, node_config.check_name, node_config.validate)


class NodeConfigController:
    """Node config writes. Called from RPC handlers on the event loop of the controller."""

    def __init__(self, election: ControllerElection, image: MetadataImage) -> None:
        self.election = election
        self.image = image
        self.keys = image.keys
        self._writes = asyncio.Lock()

    async def alter(
        self, changes: Sequence[tuple[str, Sequence[ConfigOp]]], validate_only: bool = False
    ) -> list[TopicResult]:
        """One result per entity, in request order (named as requested)."""
        dup = duplicates([node_config.entity_label(name.strip()) for name, _ in changes])
        results: list[TopicResult] = []
        fenced: RiverlogError | None = None
        for name, ops in changes:
            if node_config.entity_label(name.strip()) in dup:
                results.append(
                    TopicResult(name, ErrorCode.INVALID_REQUEST, "Duplicate node in request.")
                )
                continue
            if fenced is not None:
                results.append(TopicResult(name, fenced.code, fenced.message))
                continue
            try:
                async with self._writes:
                    await self._alter_one(name, ops, validate_only)
                results.append(TopicResult(name))
            except RiverlogError as exc:
                if exc.code in (ErrorCode.STALE_CONTROLLER_EPOCH, ErrorCode.NOT_CONTROLLER):
                    fenced = exc
                results.append(TopicResult(name, exc.code, exc.message))
            except Exception:
                log.exception("node config entity %r: unexpected error", name)
                error = ERRORS[ErrorCode.UNKNOWN_SERVER_ERROR]
                results.append(TopicResult(name, ErrorCode.UNKNOWN_SERVER_ERROR, error.message))
        return results

    async def _alter_one(self, name: str, ops: Sequence[ConfigOp], validate_only: bool) -> None:
        entity = node_config.validate_entity(name)
        key = self.keys.node_config(entity)
        for _ in range(WRITE_ATTEMPTS):
            entry = await self.image.store.get(key)
            current = node_configs_decode(entry.value) if entry is not None else {}
            configs = apply_node_config_ops(current, ops)
            if validate_only or configs == dict(current):
                return
            compare = Compare(key, entry.mod_revision if entry is not None else 0)
            op = Op(key, node_configs_encode(configs)) if configs else Op(key)
            if await self.election.write([compare], [op]) is not None:
                log.info("node configs of %s: %s", node_config.entity_label(entity), configs)
                return
        raise RiverlogError(
            f"node configs of {node_config.entity_label(entity)} keep changing; retry.",
            ErrorCode.INVALID_REQUEST,
        )
