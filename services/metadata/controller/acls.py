"""ACL writes on the controller (Kafka's CreateAcls and DeleteAcls): validate, build the new
entries of each touched resource pattern (`acl_records.after_create` / `after_delete`, pure),
and write them in one fenced transaction (`ControllerElection.write`) compared with the
revisions the decision read, so a deposed controller writes nothing and concurrent writes are
retried on fresh values. A write returns once the client-quota book (which publishes the
bindings to the gateways) shows it, so a describe right after a create sees the create.

A binding that fails validation gets its own error and is not written; the others are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from riverlog.common.acl.model import (
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    validate_binding,
)
from riverlog.common.errors import ErrorCode, RiverlogError

from ..acl_records import (
    AclTable,
    Entries,
    after_create,
    after_delete,
    entries_decode,
    entries_encode,
    pattern_key,
)
from ..store import Compare, EtcdStore, Op
from .election import ControllerElection

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
PATTERNS_PER_TXN = 100


class AclBook(Protocol):
    """What the controller needs of `ClientQuotaBook`: its store (the client sub-tree), the
    bindings it follows, and the wait for a revision to show."""

    store: EtcdStore
    acls: AclTable

    async def visible(self, revision: int) -> None: ...


class AclController:
    """Called from RPC handlers on the controller's event loop; one write at a time."""

    def __init__(self, election: ControllerElection, book: AclBook) -> None:
        self.election = election
        self.book = book
        self._writes = asyncio.Lock()

    def _key(self, pattern: ResourcePattern) -> str:
        return self.book.store.keys.prefix + pattern_key(pattern)

    async def _read(
        self, patterns: Sequence[ResourcePattern]
    ) -> tuple[dict[ResourcePattern, Entries], list[Compare]]:
        """The stored entries of `patterns` and the compares that pin what was read."""
        state: dict[ResourcePattern, Entries] = {}
        compares: list[Compare] = []
        for pattern in patterns:
            key = self._key(pattern)
            entry = await self.book.store.get(key)
            if entry is not None:
                state[pattern] = entries_decode(entry.value)
            compares.append(Compare(key, entry.mod_revision if entry is not None else 0))
        return state, compares

    async def _write(
        self, compares: list[Compare], changed: dict[ResourcePattern, Entries]
    ) -> bool:
        ops = [
            Op(self._key(p), entries_encode(entries)) if entries else Op(self._key(p))
            for p, entries in changed.items()
        ]
        if not ops:
            return True
        revision = await self.election.write(compares, ops)
        if revision is None:
            return False
        await self.book.visible(revision)
        return True

    async def create(self, creations: Sequence[AclBinding]) -> list[RiverlogError | None]:
        """One outcome per creation, in request order (None: created or already there)."""
        outcomes: list[RiverlogError | None] = []
        valid: list[AclBinding] = []
        for binding in creations:
            try:
                validate_binding(binding)
                valid.append(binding)
                outcomes.append(None)
            except RiverlogError as exc:
                outcomes.append(exc)
        patterns = sorted({b.pattern for b in valid}, key=str)
        async with self._writes:
            for chunk in _chunks(patterns):
                await self._retried(chunk, _creating([b for b in valid if b.pattern in chunk]))
        if valid:
            log.info("created ACLs: %s", "; ".join(map(str, valid)))
        return outcomes

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter deleted, in request order."""
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        async with self._writes:
            candidates = sorted(
                (
                    p
                    for p, entries in self.book.acls.patterns.items()
                    if any(f.matches(AclBinding(p, e)) for f in filters for e in entries)
                ),
                key=str,
            )
            for chunk in _chunks(candidates):
                gone = await self._retried(chunk, lambda state: after_delete(state, filters))
                for rows, more in zip(deleted, gone or [], strict=False):
                    rows.extend(more)
        flat = [b for rows in deleted for b in rows]
        if flat:
            log.info("deleted ACLs: %s", "; ".join(map(str, flat)))
        return deleted

    async def _retried(
        self,
        patterns: Sequence[ResourcePattern],
        build: Callable[
            [dict[ResourcePattern, Entries]],
            tuple[dict[ResourcePattern, Entries], list[list[AclBinding]] | None],
        ],
    ) -> list[list[AclBinding]] | None:
        """Read `patterns`, `build` their new entries, write them compared with what was read;
        again on a concurrent change. `build`'s second value is returned."""
        for _ in range(WRITE_ATTEMPTS):
            state, compares = await self._read(patterns)
            changed, extra = build(state)
            if await self._write(compares, changed):
                return extra
        raise RiverlogError(
            "ACLs kept changing under concurrent writes; retry", ErrorCode.INVALID_REQUEST
        )


def _creating(
    bindings: Sequence[AclBinding],
) -> Callable[[dict[ResourcePattern, Entries]], tuple[dict[ResourcePattern, Entries], None]]:
    def build(state: dict[ResourcePattern, Entries]) -> tuple[dict[ResourcePattern, Entries], None]:
        return after_create(state, bindings), None

    return build


def _chunks(patterns: Sequence[ResourcePattern]) -> list[Sequence[ResourcePattern]]:
    """`patterns` in runs that fit one etcd transaction (etcd's --max-txn-ops, 128 by default,
    bounds the compares and the operations, and the fence is one more compare). A request
    spanning more patterns is written one run after another, each run atomic: per-binding
    outcomes, as Kafka's CreateAcls, which is not atomic across bindings either."""
    return [patterns[i : i + PATTERNS_PER_TXN] for i in range(0, len(patterns), PATTERNS_PER_TXN)]
