"""Client quota configs and stored users: validated writes to etcd, a live copy fed by an etcd
watch, and the published image every gateway and quota instance follows.

Keys, under the root prefix P, in a sub-tree of their own (`P client/`) read and watched by a
second etcd client, so the cluster image is untouched by quota changes:

    P client/quotas/config/users/<user>[/clients/<client-id>]   JSON {quota key: value}
    P client/quotas/config/clients/<client-id>                  (Kafka's config paths)
    P client/users/<name>                                       JSON salted PBKDF2 credential
    P client/acls/<type>/<pattern type>/<name>                  ACL entries (`acl_records`)
    P client/users/<name>#<token id>                            (one per token of the user)

Quota and user writes do not depend on partitions or leadership, so any instance applies them
(no forwarding to the controller); an entity's read-modify-write is one etcd transaction
conditioned on the key's revision. A write returns once this instance's copy shows it, so a
describe right after a set sees the set. Values are validated by `riverlog.common.quota`; a
quota for a named user needs that user stored (or ANONYMOUS), the issue's "unknown users".
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.credentials import (
    StoredCredential,
    owners,
    slot_owner,
    stored_credential,
    validate_stored_name,
)
from riverlog.common.quota.entity import (
    ANONYMOUS,
    DEFAULT,
    QuotaEntity,
    QuotaType,
    validate_quota_values,
)

from .acl_records import ACLS, AclTable
from .follower import EtcdFollower
from .store import Change, Compare, Entry, EtcdStore, Op

log = logging.getLogger(__name__)

_QUOTAS = "quotas"
_USERS = "users/"
_WRITE_ATTEMPTS = 5
_VISIBLE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class QuotaOp:
    """Set `key` to `value`, or remove it."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True)
class AlterResult:
    entity: QuotaEntity | None
    error: RiverlogError | None = None


def _credential_encode(c: StoredCredential) -> bytes:
    return json.dumps(
        {
            "mechanism": c.mechanism,
            "iterations": c.iterations,
            "salt": base64.b64encode(c.salt).decode(),
            "hash": base64.b64encode(c.hash).decode(),
        },
        sort_keys=True,
    ).encode()


def _credential_decode(name: str, raw: bytes) -> StoredCredential:
    d = json.loads(raw)
    return StoredCredential(
        name,
        str(d["mechanism"]),
        int(d["iterations"]),
        base64.b64decode(d["salt"]),
        base64.b64decode(d["hash"]),
    )


class ClientQuotaBook:
    """This instance's copy of the quota configs and users, and the writes that change them.

    Lifecycle: `await start()` (read everything, then watch), `await stop()`. Owned by the
    event loop; the etcd watch thread hands changes over with `call_soon_threadsafe`. Followers
    wait with `changed(version)` for the next version.
    """

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.version = 0
        # Waits for a revision that gave up: a write the watch never delivered.
        self.wait_timeouts = 0
        self.configs: dict[QuotaEntity, dict[QuotaType, float]] = {}
        self.users: dict[str, StoredCredential] = {}
        self.acls = AclTable()
        """The ACL bindings (written by the controller, `controller/acls.py`; published with
        the quotas and users so the gateways follow one stream)."""
        self._changed = asyncio.Event()
        self._follower = EtcdFollower(
            store, self._load, self._apply, what="client quotas", task_name="client-quota-book"
        )

    # --- lifecycle and feeding ------------------------------------------------------------------

    async def start(self) -> None:
        await self._follower.start()

    async def stop(self) -> None:
        await self._follower.stop()

    def _load(self, revision: int, entries: dict[str, Entry]) -> None:
        self.configs.clear()
        self.users.clear()
        self.acls.clear()
        for key, entry in entries.items():
            self._absorb(key, entry.value)
        self._bump(revision)

    def _apply(self, revision: int, changes: list[Change]) -> None:
        if revision <= self.version:
            return
        for change in changes:
            self._absorb(change.key, change.value)
        self._bump(revision)

    def _absorb(self, key: str, value: bytes | None) -> None:
        rel = self.store.keys.relative(key)
        if rel.startswith(ACLS):
            self.acls.absorb(rel, value)
            return
        try:
            if rel.startswith(_QUOTAS + "/"):
                entity = QuotaEntity.parse(rel[len(_QUOTAS) :])
                if value is None:
                    self.configs.pop(entity, None)
                else:
                    raw = json.loads(value)
                    self.configs[entity] = validate_quota_values(raw, entity.path)
            elif rel.startswith(_USERS):
                name = rel[len(_USERS) :]
                if value is None:
                    self.users.pop(name, None)
                else:
                    self.users[name] = _credential_decode(name, value)
        except (ValueError, KeyError, TypeError, RiverlogError) as exc:
            log.error("ignoring malformed client quota entry at %s: %s", key, exc)

    def _bump(self, revision: int) -> None:
        self.version = revision
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, version: int) -> None:
        """Return once the copy is newer than `version`."""
        while self.version <= version:
            await self._changed.wait()

    async def visible(self, revision: int) -> None:
        """Return once this copy shows `revision` (or after a few seconds)."""
        await self._visible(revision)

    async def _visible(self, revision: int) -> None:
        try:
            async with asyncio.timeout(_VISIBLE_TIMEOUT_S):
                while self.version < revision:
                    await self.changed(self.version)
        except TimeoutError:
            self.wait_timeouts += 1
            log.warning(
                "the client quota copy waited %.1f s for revision %d and is still at %d",
                _VISIBLE_TIMEOUT_S,
                revision,
                self.version,
            )

    # --- quotas -----------------------------------------------------------------------------

    def _key(self, entity: QuotaEntity) -> str:
        return f"{self.store.keys.prefix}{_QUOTAS}{entity.path}"

    def _check_user(self, entity: QuotaEntity) -> None:
        user = entity.user
        if user is None or user in (DEFAULT, ANONYMOUS) or user in owners(self.users):
            return
        raise RiverlogError(
            f"unknown user {user!r} at {entity.path}: add it first (riverlog users add {user})"
            f" or use {DEFAULT} / {ANONYMOUS}",
            ErrorCode.INVALID_REQUEST,
        )

    def _validated(self, entity: QuotaEntity, ops: Sequence[QuotaOp]) -> dict[str, float | None]:
        self._check_user(entity)
        keys = [op.key for op in ops]
        dupes = {k for k in keys if keys.count(k) > 1}
        if dupes:
            raise RiverlogError(
                f"quota key {sorted(dupes)[0]!r} appears twice for {entity.path}",
                ErrorCode.INVALID_REQUEST,
            )
        validate_quota_values({op.key: 1.0 for op in ops if op.remove}, entity.path)
        sets = validate_quota_values({op.key: op.value for op in ops if not op.remove}, entity.path)
        out: dict[str, float | None] = {t.key: v for t, v in sets.items()}
        out.update({op.key: None for op in ops if op.remove})
        return out

    async def alter(
        self, entries: Sequence[tuple[QuotaEntity, Sequence[QuotaOp]]], validate_only: bool
    ) -> list[AlterResult]:
        """Apply each entity's ops (one transaction per entity); per-entity errors."""
        results: list[AlterResult] = []
        last_revision = 0
        for entity, ops in entries:
            try:
                changes = self._validated(entity, ops)
                if not validate_only:
                    last_revision = max(last_revision, await self._write(entity, changes))
                results.append(AlterResult(entity))
            except RiverlogError as exc:
                if exc.code == ErrorCode.NETWORK_EXCEPTION:
                    raise
                results.append(AlterResult(entity, exc))
        if last_revision:
            await self._visible(last_revision)
        return results

    async def _write(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> int:
        key = self._key(entity)
        for _ in range(_WRITE_ATTEMPTS):
            current = await self.store.get(key)
            values: dict[str, float] = json.loads(current.value) if current else {}
            for k, v in changes.items():
                if v is None:
                    values.pop(k, None)
                else:
                    values[k] = v
            op = Op(key, json.dumps(values, sort_keys=True).encode()) if values else Op(key)
            compare = Compare(key, mod_revision=current.mod_revision if current else 0)
            revision = await self.store.txn([compare], [op])
            if revision is not None:
                return revision
        raise RiverlogError(
            f"{entity.path} kept changing under concurrent writes; try again",
            ErrorCode.UNKNOWN_SERVER_ERROR,
        )

    # --- users ------------------------------------------------------------------------------

    async def upsert_user(self, name: str, password: str) -> None:
        """Store a user's password, or under a token slot (`<user>#<id>`) one of its tokens;
        the user's other credentials are kept."""
        credential = stored_credential(name, password)
        key = f"{self.store.keys.prefix}{_USERS}{name}"
        revision = await self.store.txn([], [Op(key, _credential_encode(credential))])
        if revision is not None:
            await self._visible(revision)

    async def delete_user(self, name: str) -> None:
        """Delete a user's password and every token (`name` a user), or one token (`name` a
        token slot)."""
        validate_stored_name(name)
        doomed = [n for n in self.users if n == name or slot_owner(n) == name]
        if not doomed:
            raise RiverlogError(f"unknown user {name!r}", ErrorCode.INVALID_REQUEST)
        prefix = f"{self.store.keys.prefix}{_USERS}"
        revision = await self.store.txn([], [Op(prefix + n) for n in sorted(doomed)])
        if revision is not None:
            await self._visible(revision)
