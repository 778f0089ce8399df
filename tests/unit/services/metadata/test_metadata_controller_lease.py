"""The controller's lease keepalive on a ManualClock (no etcd, no sleeps): a controller steps
down only once etcd has been unreachable for longer than the lease, stays on through shorter
outages, and on a lapsed lease steps down and registers again under a new lease."""

from __future__ import annotations

import asyncio

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller.election import ControllerElection
from riverlog.services.metadata.records import ControllerRecord
from riverlog.services.metadata.store import Keys

LEASE_MS = 3000


class FakeLeaseStore:
    """The three lease calls the keepalive makes; `answers` scripts refresh_lease (a ttl, or
    None for an unreachable etcd)."""

    def __init__(self) -> None:
        self.keys = Keys("/t/")
        self.answers: list[int | None] = []
        self.leases_granted = 0
        self.txns: list[list] = []

    async def refresh_lease(self, lease_id: int) -> int:
        answer = self.answers.pop(0)
        if answer is None:
            raise RiverlogError("etcd unreachable", ErrorCode.NETWORK_EXCEPTION)
        return answer

    async def grant_lease(self, ttl_ms: int) -> int:
        self.leases_granted += 1
        return 100 + self.leases_granted

    async def txn(self, compares, ops) -> int:
        self.txns.append(list(ops))
        return len(self.txns)


class FakeImage:
    controller = None

    def add_listener(self, callback) -> None:
        pass


def _controller(clock: ManualClock) -> tuple[ControllerElection, FakeLeaseStore]:
    config = MetadataConfig.from_args(
        1, "127.0.0.1", 1001, "127.0.0.1:2379", {"metadata.controller.lease.ms": str(LEASE_MS)}
    )
    store = FakeLeaseStore()
    election = ControllerElection(store, FakeImage(), config, clock)
    election.record = ControllerRecord(1, 1, "127.0.0.1", 1001)
    election.lease_id = 50
    return election, store


def test_an_outage_shorter_than_the_lease_keeps_the_controller() -> None:
    clock = ManualClock()
    election, store = _controller(clock)
    store.answers = [None, None, 1]

    async def run() -> None:
        last_ok = clock.monotonic_ms()
        for _ in range(2):
            clock.advance(LEASE_MS // 3)
            assert await election.keepalive_step(last_ok) == last_ok
            assert election.is_controller
        clock.advance(LEASE_MS // 3)
        assert await election.keepalive_step(last_ok) == clock.monotonic_ms()
        assert election.is_controller

    asyncio.run(run())


def test_an_outage_longer_than_the_lease_steps_down() -> None:
    clock = ManualClock()
    election, store = _controller(clock)
    store.answers = [None, None]

    async def run() -> None:
        last_ok = clock.monotonic_ms()
        clock.advance(LEASE_MS)
        await election.keepalive_step(last_ok)
        assert election.is_controller  # exactly the lease: not longer yet
        clock.advance(1)
        assert await election.keepalive_step(last_ok) == last_ok
        assert not election.is_controller
        assert store.leases_granted == 0  # etcd is unreachable: nothing to register with

    asyncio.run(run())


def test_a_lapsed_lease_steps_down_and_registers_again() -> None:
    clock = ManualClock()
    election, store = _controller(clock)
    store.answers = [0]

    async def run() -> None:
        clock.advance(5 * LEASE_MS)
        assert await election.keepalive_step(0) == clock.monotonic_ms()
        assert not election.is_controller
        assert (store.leases_granted, election.lease_id) == (1, 101)
        [[instance_put]] = store.txns
        assert instance_put.key == store.keys.instance(1) and instance_put.lease == 101

    asyncio.run(run())
