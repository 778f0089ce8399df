"""The etcd key schema and the only module that talks to etcd (through etcd3, synchronous: every
call runs in a worker thread so the event loop never blocks).

Keys, under a root prefix P (default `/riverlog/`, `metadata.etcd.prefix`):

    P cluster_id                  text, written once (put-if-absent)
    P controller                  JSON {instance_id, epoch, host, port}; on the holder's lease
    P controller_epoch            decimal counter; +1 in the transaction that wins an election
    P instances/<id>              JSON {instance_id, host, port}; on that instance's lease
    P nodes/<kind>/<id>           JSON node registration + lease_id; on the node's lease
    P topics/<name>               JSON {topic_id, partitions, configs, internal}
    P partitions/<topic>/<p>      JSON {replicas, leader, leader_epoch, isr, partition_epoch}
    P coordinators/<p>            JSON {coordinator_id, epoch}: owner of __consumer_offsets-p
    P node_configs/<id>|default   JSON {configs}: dynamic storage-node configs of one node or of
                                  the cluster-wide default entity (decision 0024)
    P producer_ids/next_block     JSON {next_producer_id, node_id}: the first id not yet handed out
    P controller_state/storage_incarnations  JSON {node id: incarnation} the controller acted on
    P controller_state/draining_nodes  JSON [node id]: storage nodes being drained (no new
                                  replica goes to them; decision 0025's addendum)
    P node_incarnation            "<kind>/<id>" of the last AllocateIncarnation: each put's
                                  revision is a new incarnation (decision 0003)

Writes are transactions built from `Compare`s and `Op`s. A controller write also compares
the controller key with the writer's own record (`fenced_txn`), so a deposed controller cannot
change topics or partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import etcd3
import etcd3.events
import etcd3.exceptions
import etcd3.transactions
import etcd3.utils
from etcd3.client import Endpoint

from riverlog.common.errors import ErrorCode, RiverlogError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Entry:
    """A key's value as etcd holds it."""

    value: bytes
    mod_revision: int
    lease: int


@dataclass(frozen=True, slots=True)
class Change:
    """One watched event: `value` None means the key was deleted."""

    key: str
    value: bytes | None
    mod_revision: int
    lease: int


@dataclass(frozen=True, slots=True)
class Compare:
    """`key` must have this mod revision (0: the key must be absent) or, when `value` is
    given, exactly this value."""

    key: str
    mod_revision: int = 0
    value: bytes | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """A put (value given), a delete of one key, or a delete of everything under `key`."""

    key: str
    value: bytes | None = None
    lease: int = 0
    prefix: bool = False


NODE_CONFIG_DEFAULT_KEY = "default"

WatchCallback = Callable[[int, list[Change] | None], None]


class Keys:
    """Key names under one root prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.cluster_id = prefix + "cluster_id"
        self.controller = prefix + "controller"
        self.controller_epoch = prefix + "controller_epoch"
        self.instances = prefix + "instances/"
        self.nodes = prefix + "nodes/"
        self.topics = prefix + "topics/"
        self.partitions = prefix + "partitions/"
        self.coordinators = prefix + "coordinators/"
        self.node_configs = prefix + "node_configs/"
        self.producer_ids_next_block = prefix + "producer_ids/next_block"
        self.storage_incarnations = prefix + "controller_state/storage_incarnations"
        self.draining_nodes = prefix + "controller_state/draining_nodes"
        self.node_incarnation = prefix + "node_incarnation"

    def instance(self, instance_id: int) -> str:
        return f"{self.instances}{instance_id}"

    def node(self, kind: str, node_id: int) -> str:
        return f"{self.nodes}{kind}/{node_id}"

    def topic(self, name: str) -> str:
        return self.topics + name

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.partitions}{topic}/{partition}"

    def coordinator(self, partition: int) -> str:
        return f"{self.coordinators}{partition}"

    def node_config(self, entity: str) -> str:
        """A node config entity's key: its node id, or `default` for the default entity ("")."""
        return self.node_configs + (entity or NODE_CONFIG_DEFAULT_KEY)

    def partitions_of(self, topic: str) -> str:
        return f"{self.partitions}{topic}/"

    def relative(self, key: str) -> str:
        return key[len(self.prefix) :] if key.startswith(self.prefix) else key


def delivered_revision(header_revision: int, changes: Sequence[Change]) -> int:
    """The revision a watch response brings a follower up to: its last event's. A catch-up
    response's header names etcd's current revision even when the events stop short of it
    (etcd sends at most 1000 revisions per response and the rest in the next, under the same
    header): taking the header would make the follower skip that next response as old."""
    return max((c.mod_revision for c in changes), default=header_revision)


def _unavailable(exc: Exception) -> RiverlogError:
    return RiverlogError(f"etcd is unavailable: {exc!r}", ErrorCode.NETWORK_EXCEPTION)


def txn_changed(ops: Sequence[Op], responses: Sequence[Any]) -> bool:
    """Whether a succeeded transaction wrote: a put always does, a delete only when it
    removed a key."""
    return any(op.value is not None for op in ops) or any(
        r.response_delete_range.deleted > 0 for r in responses
    )


class EtcdCredentials:
    """TLS credentials for https:// etcd endpoints (decision 0035, addendum): the CA etcd's
    certificate is verified against and, for etcd's `--client-cert-auth`, the client
    certificate and key this process presents; etcd3's own `ca_cert` / `cert_key` /
    `cert_cert`. The files are read once, here: an unreadable one is
    RiverlogError(INVALID_CONFIG) naming it, at start-up."""

    def __init__(
        self, ca_cert: str, cert_key: str | None = None, cert_cert: str | None = None
    ) -> None:
        try:
            self.channel: Any = etcd3.MultiEndpointEtcd3Client.get_secure_creds(
                ca_cert, cert_key, cert_cert
            )
        except OSError as exc:
            raise RiverlogError(
                f"cannot read the etcd TLS file {exc.filename!r}: {exc.strerror or exc}",
                ErrorCode.INVALID_CONFIG,
            ) from None


class EtcdStore:
    """Async access to etcd. One per process; safe to call from any task of its loop.
    https:// endpoints need `credentials` (etcd's client TLS); http:// ones take none."""

    def __init__(
        self,
        endpoints: Sequence[str],
        prefix: str,
        timeout_s: float = 5.0,
        credentials: EtcdCredentials | None = None,
    ) -> None:
        self.keys = Keys(prefix)
        eps = []
        for url in endpoints:
            parts = urlsplit(url if "://" in url else f"http://{url}")
            host, port = parts.hostname or "127.0.0.1", parts.port or 2379
            secure = parts.scheme == "https"
            if secure and credentials is None:
                raise RiverlogError(
                    f"etcd endpoint {url} is https:// but no etcd TLS credentials were given",
                    ErrorCode.INVALID_CONFIG,
                )
            creds = credentials.channel if secure and credentials is not None else None
            eps.append(Endpoint(host, port, secure=secure, creds=creds, time_retry=0.5))
        self._client = etcd3.MultiEndpointEtcd3Client(
            endpoints=eps, timeout=timeout_s, failover=True
        )
        self._watch_id: Any = None

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except etcd3.exceptions.Etcd3Exception as exc:
            raise _unavailable(exc) from exc
        except ValueError as exc:  # etcd3: "Trying to use a failed node"
            raise _unavailable(exc) from exc

    def close(self) -> None:
        self.cancel_watch()
        self._client.close()

    # --- reads ----------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        value, meta = await self._run(self._client.get, key)
        if meta is None:
            return None
        return Entry(value, meta.mod_revision, meta.lease_id)

    async def read_all(self) -> tuple[int, dict[str, Entry]]:
        """Every key under the prefix and the revision they are read at."""

        def read() -> tuple[int, dict[str, Entry]]:
            response = self._client.get_prefix_response(self.keys.prefix)
            entries = {
                kv.key.decode(): Entry(kv.value, kv.mod_revision, kv.lease) for kv in response.kvs
            }
            return int(response.header.revision), entries

        result: tuple[int, dict[str, Entry]] = await self._run(read)
        return result

    # --- transactions -----------------------------------------------------------------------

    def _compare(self, c: Compare) -> Any:
        tx = self._client.transactions
        if c.value is not None:
            return tx.value(c.key) == c.value
        return tx.mod(c.key) == c.mod_revision

    def _op(self, op: Op) -> Any:
        tx = self._client.transactions
        if op.value is not None:
            return tx.put(op.key, op.value, op.lease or None)
        if op.prefix:
            end = etcd3.utils.prefix_range_end(etcd3.utils.to_bytes(op.key))
            return etcd3.transactions.Delete(op.key, range_end=end)
        return tx.delete(op.key)

    async def txn(self, compares: Sequence[Compare], ops: Sequence[Op]) -> int | None:
        """Apply `ops` atomically if every compare holds: the revision of the change, 0 when
        it held but changed nothing, or None when a compare failed.

        A transaction that changes nothing (only deletes of absent keys) does not advance
        etcd's revision, and its header then names the store's current revision: that may be
        a write under another prefix (the replica sizes, another cluster sharing etcd) that
        no watch of this prefix ever delivers. Waiting for it stalled every such write until
        an unrelated event arrived (decision 0007), so it is reported as 0: nothing to wait
        for."""

        def run() -> int | None:
            response = self._client.kvstub.Txn(
                etcd3.etcdrpc.TxnRequest(
                    compare=[self._compare(c).build_message() for c in compares],
                    success=self._client._ops_to_requests([self._op(o) for o in ops]),
                    failure=[],
                ),
                self._client.timeout,
                credentials=self._client.call_credentials,
                metadata=self._client.metadata,
            )
            if not response.succeeded:
                return None
            return int(response.header.revision) if txn_changed(ops, response.responses) else 0

        try:
            result: int | None = await self._run(run)
        except RiverlogError:
            raise
        except Exception as exc:  # grpc errors from the raw stub call
            status = getattr(exc, "code", None)
            name = getattr(status() if callable(status) else None, "name", "")
            if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"):
                raise _unavailable(exc) from exc
            log.error("etcd refused a transaction: %r", exc)
            raise RiverlogError("the metadata store refused the change") from exc
        return result

    async def fenced_txn(
        self, controller_value: bytes, compares: Sequence[Compare], ops: Sequence[Op]
    ) -> int | None:
        """A controller write: `txn` that also requires the controller key to still hold
        `controller_value`. Raises STALE_CONTROLLER_EPOCH when it does not; None when only
        another compare failed (a concurrent change: re-read and retry)."""
        fence = Compare(self.keys.controller, value=controller_value)
        revision = await self.txn([fence, *compares], ops)
        if revision is not None:
            return revision
        current = await self.get(self.keys.controller)
        if current is None or current.value != controller_value:
            raise RiverlogError(
                "this instance is no longer the controller", ErrorCode.STALE_CONTROLLER_EPOCH
            )
        return None

    async def ensure_cluster_id(self, candidate: str) -> str:
        """The cluster id: `candidate` if this is the first instance ever, else the stored one."""
        key = self.keys.cluster_id
        await self.txn([Compare(key, mod_revision=0)], [Op(key, candidate.encode())])
        entry = await self.get(key)
        if entry is None:
            raise RiverlogError("the cluster id vanished from etcd", ErrorCode.NETWORK_EXCEPTION)
        return entry.value.decode()

    # --- leases -----------------------------------------------------------------------------

    async def grant_lease(self, ttl_ms: int) -> int:
        ttl_s = max(1, -(-ttl_ms // 1000))
        lease = await self._run(self._client.lease, ttl_s)
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> int:
        """Keep a lease alive; its remaining TTL in seconds, 0 when it no longer exists."""

        def refresh() -> int:
            responses = list(self._client.refresh_lease(lease_id))
            return int(responses[0].TTL) if responses else 0

        result: int = await self._run(refresh)
        return result

    async def revoke_lease(self, lease_id: int) -> None:
        """Revoke, deleting every key on the lease; an unknown lease is not an error."""
        try:
            await self._run(self._client.revoke_lease, lease_id)
        except RiverlogError:
            raise
        except Exception as exc:  # grpc NOT_FOUND: already gone
            log.debug("revoke of lease %x: %s", lease_id, exc)

    # --- watch ------------------------------------------------------------------------------

    async def watch(self, start_revision: int, callback: WatchCallback) -> None:
        """Call `callback(revision, changes)` from etcd3's watch thread for every change under
        the prefix from `start_revision` on; `changes` None means the watch broke (re-read)."""

        def on_response(response: Any) -> None:
            if response is None or isinstance(response, Exception):
                log.warning("etcd watch broke: %r", response)
                callback(0, None)
                return
            changes = [
                Change(
                    key=ev.key.decode(),
                    value=None if isinstance(ev, etcd3.events.DeleteEvent) else ev.value,
                    mod_revision=int(ev.mod_revision),
                    lease=int(ev.lease),
                )
                for ev in response.events
            ]
            callback(delivered_revision(int(response.header.revision), changes), changes)

        self.cancel_watch()
        self._watch_id = await self._run(
            self._client.add_watch_prefix_callback,
            self.keys.prefix,
            on_response,
            start_revision=start_revision,
        )

    def cancel_watch(self) -> None:
        if self._watch_id is not None:
            watch_id, self._watch_id = self._watch_id, None
            try:
                self._client.cancel_watch(watch_id)
            except Exception as exc:
                log.debug("cancel watch: %r", exc)
