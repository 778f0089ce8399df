"""Controller election in etcd, and the fence on every controller write.

Each instance holds one etcd lease (`metadata.controller.lease.ms`) that carries its
`instances/<id>` key and, while it is the controller, the `controller` key. An instance
campaigns with one transaction: "the controller key is absent and the epoch counter is what I
read" → put the controller key under my lease and the counter + 1. So the epoch grows by
exactly one per election. Losers follow the key through the image (one etcd watch) and
campaign again when it disappears, with a slow periodic retry as a safety net.

Every controller write goes through `ControllerElection.write()`: an etcd transaction whose
compare includes "the controller key still holds my record (instance id and epoch)". A deposed
controller (paused past its lease, partitioned from etcd) finds that compare false, steps down
and answers STALE_CONTROLLER_EPOCH; it also steps down when its lease refresh says the lease is
gone or when the image shows another holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.errors import ErrorCode, RiverlogError

from ..config import MetadataConfig
from ..image import MetadataImage
from ..records import ControllerRecord, InstanceRecord
from ..store import Compare, EtcdStore, Op
from .background import cancel_all

log = logging.getLogger(__name__)


class ControllerElection:
    """Campaigns for and holds the controller role. Lifecycle: `await start(host, port)`
    (after the image started), `await stop()` (revokes the lease: a standby takes over at
    once). Runs its keepalive and campaign tasks on the event loop; no locks."""

    def __init__(
        self,
        store: EtcdStore,
        image: MetadataImage,
        config: MetadataConfig,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.clock = clock  # how long etcd has been unreachable; tests use a ManualClock
        self.image = image
        self.config = config
        self.keys = store.keys
        self.lease_id = 0
        self.record: ControllerRecord | None = None  # set while this instance is controller
        self.elections_won = 0
        self._elected_at = 0
        self._host = config.host
        self._port = config.port
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        image.add_listener(self._on_image)

    @property
    def instance_id(self) -> int:
        return self.config.instance_id

    @property
    def is_controller(self) -> bool:
        return self.record is not None

    @property
    def refresh_interval_s(self) -> float:
        return self.config.controller_lease_ms / 3000

    async def start(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        await self._new_lease()
        self._tasks = [
            asyncio.create_task(self._keepalive_loop(), name="controller-keepalive"),
            asyncio.create_task(self._campaign_loop(), name="controller-campaign"),
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_all(tasks)
        self._step_down("shutting down")
        if self.lease_id:
            with contextlib.suppress(RiverlogError):
                await self.store.revoke_lease(self.lease_id)

    # --- the fence ----------------------------------------------------------------------------

    async def write(self, compares: Sequence[Compare], ops: Sequence[Op]) -> int | None:
        """A fenced controller write; the new revision (the image has caught up with it when
        this returns), or None when one of `compares` failed. Raises NOT_CONTROLLER when this
        instance is not the controller and STALE_CONTROLLER_EPOCH when it was deposed."""
        record = self.record
        if record is None:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)
        try:
            revision = await self.store.fenced_txn(record.encode(), compares, ops)
        except RiverlogError as exc:
            if exc.code == ErrorCode.STALE_CONTROLLER_EPOCH:
                self._step_down(f"a write was fenced (epoch {record.epoch} is stale)")
                self._wake.set()
            raise
        if revision is not None:
            await self.image.wait_for_version(revision)
        return revision

    # --- campaign -----------------------------------------------------------------------------

    async def _new_lease(self) -> None:
        self.lease_id = await self.store.grant_lease(self.config.controller_lease_ms)
        instance = InstanceRecord(self.instance_id, self._host, self._port)
        await self.store.txn(
            [], [Op(self.keys.instance(self.instance_id), instance.encode(), self.lease_id)]
        )
        log.info("instance %d registered (lease %x)", self.instance_id, self.lease_id)

    async def _campaign_loop(self) -> None:
        while True:
            holder = self.image.controller
            if (
                self.record is None
                and holder is not None
                and holder.instance_id == self.instance_id
            ):
                await self._reclaim(holder)
            elif self.record is None and holder is None:
                try:
                    await self._campaign()
                except RiverlogError as exc:
                    log.warning("campaign failed: %s", exc)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.refresh_interval_s):
                    await self._wake.wait()

    async def _reclaim(self, stale: ControllerRecord) -> None:
        """The key names this instance but not this process (a previous incarnation killed
        before its lease ran out, or a step-down on a transient error): instance ids are
        unique, so that holder is gone. Delete the key (only if unchanged) and campaign."""
        log.info("removing the controller key left by this instance's epoch %d", stale.epoch)
        try:
            await self.store.txn(
                [Compare(self.keys.controller, value=stale.encode())],
                [Op(self.keys.controller)],
            )
        except RiverlogError as exc:
            log.warning("cannot remove the stale controller key: %s", exc)

    async def _campaign(self) -> None:
        counter = await self.store.get(self.keys.controller_epoch)
        current = int(counter.value) if counter is not None else 0
        record = ControllerRecord(self.instance_id, current + 1, self._host, self._port)
        compares = [
            Compare(self.keys.controller, mod_revision=0),
            Compare(self.keys.controller_epoch, counter.mod_revision if counter else 0),
        ]
        ops = [
            Op(self.keys.controller, record.encode(), self.lease_id),
            Op(self.keys.controller_epoch, str(record.epoch).encode()),
        ]
        revision = await self.store.txn(compares, ops)
        if revision is None:
            return  # another instance won; the image will show it
        self.record = record
        self._elected_at = revision
        self.elections_won += 1
        log.info("instance %d is the controller (epoch %d)", self.instance_id, record.epoch)
        await self.image.wait_for_version(revision)

    def _on_image(self) -> None:
        holder = self.image.controller
        if holder is None:
            self._wake.set()
        if self.record is None or self.image.cluster.version < self._elected_at:
            return
        if holder != self.record:
            self._step_down(f"the controller key now holds {holder}")

    def _step_down(self, why: str) -> None:
        if self.record is not None:
            log.warning(
                "instance %d steps down as controller (epoch %d): %s",
                self.instance_id,
                self.record.epoch,
                why,
            )
            self.record = None

    # --- lease --------------------------------------------------------------------------------

    async def _keepalive_loop(self) -> None:
        last_ok_ms = self.clock.monotonic_ms()
        while True:
            await asyncio.sleep(self.refresh_interval_s)
            last_ok_ms = await self.keepalive_step(last_ok_ms)

    async def keepalive_step(self, last_ok_ms: int) -> int:
        """One refresh of the instance lease: steps down when etcd has been unreachable for
        longer than the lease (measured on `clock` from `last_ok_ms`, the last refresh that
        got an answer) or when the lease lapsed, and takes a new lease then. Returns the new
        `last_ok_ms`. Apart from the loop's sleep, so tests drive it with a manual clock."""
        try:
            ttl = await self.store.refresh_lease(self.lease_id)
        except RiverlogError as exc:
            log.warning("lease refresh failed: %s", exc)
            if self.clock.monotonic_ms() - last_ok_ms > self.config.controller_lease_ms:
                self._step_down("etcd unreachable for longer than the lease")
            return last_ok_ms
        if ttl > 0:
            return self.clock.monotonic_ms()
        self._step_down("the instance lease lapsed")
        try:
            await self._new_lease()
            last_ok_ms = self.clock.monotonic_ms()
        except RiverlogError as exc:
            log.warning("cannot renew the instance lease: %s", exc)
        self._wake.set()
        return last_ok_ms
