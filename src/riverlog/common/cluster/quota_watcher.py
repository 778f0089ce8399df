"""Follow the client quota configs, stored users and ACL bindings by push: one WatchClientQuotas
stream to a metadata instance, moving to another whenever the stream breaks.

Gateways (quotas, authentication and authorization) and quota service instances (quotas) keep
their resolver, user table and ACL index here. The metadata service sends the whole quota, user
and ACL state at the start of the stream and again after every change (it is small: a few
entries per configured entity, user and resource pattern), so a change reaches every follower
within the etcd watch latency, without polling and without restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpc

from riverlog.common.acl.authorizer import AclIndex
from riverlog.common.acl.convert import binding_from_proto
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.convert import image_from_proto
from riverlog.common.quota.credentials import StoredCredential
from riverlog.common.quota.resolver import QuotaResolver
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import metadata_pb2

from .client import MetadataClient

log = logging.getLogger(__name__)

QuotaListener = Callable[[QuotaResolver, dict[str, StoredCredential]], None]
AclListener = Callable[[AclIndex], None]
_RECONNECT_START_S = 0.05
_RECONNECT_MAX_S = 1.0


class ClientQuotaWatcher:
    """The current `QuotaResolver` and users, kept by a task on the caller's event loop.

    Lifecycle: `await start()` returns once the first image arrived (or after `timeout_s`, with
    no quotas and no users: start-up never blocks on this); listeners run in the task after
    each image; `await stop()` ends it. A version older than the one held is ignored.
    """

    def __init__(self, client: MetadataClient, watcher_id: int = -1) -> None:
        self.client = client
        self.watcher_id = watcher_id
        self.resolver = QuotaResolver()
        self.users: dict[str, StoredCredential] = {}
        self.version = -1
        self._listeners: list[QuotaListener] = []
        self.acls = AclIndex()
        self._acl_listeners: list[AclListener] = []
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()

    def add_listener(self, callback: QuotaListener) -> None:
        self._listeners.append(callback)

    def add_acl_listener(self, callback: AclListener) -> None:
        """`callback(index)` after every image whose ACL bindings differ from the last."""
        self._acl_listeners.append(callback)

    async def start(self, timeout_s: float = 30.0) -> bool:
        """Start following; True once the first image is in, False on timeout."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="client-quota-watcher")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._first.wait()
        return self._first.is_set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        backoff = _RECONNECT_START_S
        while True:
            address = self.client.current_address
            stub = self.client.stub_for(address)
            call = stub.WatchClientQuotas(
                metadata_pb2.WatchClientQuotasRequest(node_id=self.watcher_id)
            )
            try:
                async for image in call:
                    self._apply(image)
                    backoff = _RECONNECT_START_S
                log.info("quota watch on %s ended; reconnecting", address)
            except grpc.RpcError as exc:
                err = from_rpc_error(exc)
                if err.code == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.warning("quota watch on %s failed: %s", address, err)
                else:
                    log.info("quota watch on %s broke (%s); reconnecting", address, err)
            except RiverlogError as exc:
                log.warning("quota watch on %s sent a bad image: %s", address, exc)
            finally:
                call.cancel()
            self.client.advance()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _RECONNECT_MAX_S)

    def _apply(self, image: metadata_pb2.ClientQuotaImage) -> None:
        if image.version < self.version:
            return
        self.resolver, self.users = image_from_proto(image)
        acls = AclIndex(binding_from_proto(b) for b in image.acls)
        acls_changed = acls.bindings != self.acls.bindings
        self.acls = acls
        self.version = image.version
        for listener in list(self._listeners):
            try:
                listener(self.resolver, self.users)
            except Exception:
                log.exception("quota listener failed")
        if acls_changed or not self._first.is_set():
            for acl_listener in list(self._acl_listeners):
                try:
                    acl_listener(self.acls)
                except Exception:
                    log.exception("ACL listener failed")
        self._first.set()
