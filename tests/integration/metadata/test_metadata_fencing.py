"""The controller fence, in process against a real etcd: a controller whose key was taken over
has its next write refused by the etcd transaction, answers STALE_CONTROLLER_EPOCH and steps
down; the election counter grows by exactly one per election."""

from __future__ import annotations

import asyncio
import uuid

import etcd3
import pytest
from metadata_procs import run

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller.election import ControllerElection
from riverlog.services.metadata.image import MetadataImage
from riverlog.services.metadata.records import ControllerRecord
from riverlog.services.metadata.store import EtcdStore, Op

pytestmark = pytest.mark.integration


def _config(etcd, prefix: str, instance_id: int) -> MetadataConfig:
    return MetadataConfig.from_args(
        instance_id,
        "127.0.0.1",
        1000 + instance_id,
        etcd.endpoint,
        {"metadata.etcd.prefix": prefix, "metadata.controller.lease.ms": "2000"},
    )


async def _until(predicate, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_deposed_controller_write_is_refused_and_it_steps_down(etcd):
    prefix = f"/rl-{uuid.uuid4().hex[:10]}/"

    async def scenario() -> None:
        config = _config(etcd, prefix, 7)
        store = EtcdStore(config.etcd_endpoints, prefix)
        image = MetadataImage(store)
        await image.start()
        election = ControllerElection(store, image, config)
        await election.start("127.0.0.1", 1007)
        try:
            await _until(lambda: election.is_controller)
            mine = election.record
            assert mine is not None and mine.epoch == 1
            key = store.keys.prefix + "fence-probe"
            assert await election.write([], [Op(key, b"{}")]) is not None

            # Another instance takes the key with epoch 2, by a blocking client: the event
            # loop cannot see the change before the next write is attempted.
            raw = etcd3.client(host="127.0.0.1", port=etcd.client_port)
            usurper = ControllerRecord(8, mine.epoch + 1, "127.0.0.1", 1008)
            raw.put(store.keys.controller, usurper.encode())
            raw.put(store.keys.controller_epoch, str(usurper.epoch))
            raw.close()

            with pytest.raises(RiverlogError) as refused:
                await election.write([], [Op(key, b'{"zombie": true}')])
            assert refused.value.code == ErrorCode.STALE_CONTROLLER_EPOCH
            assert not election.is_controller
            entry = await store.get(key)
            assert entry is not None and entry.value == b"{}"  # the zombie write never landed
            with pytest.raises(RiverlogError) as not_controller:
                await election.write([], [Op(key, b"{}")])
            assert not_controller.value.code == ErrorCode.NOT_CONTROLLER
        finally:
            await election.stop()
            await image.stop()
            store.close()

    run(scenario())


def test_each_election_bumps_the_epoch_by_exactly_one(etcd):
    prefix = f"/rl-{uuid.uuid4().hex[:10]}/"

    async def scenario() -> None:
        stores, images, elections = [], [], []
        for i in range(3):
            config = _config(etcd, prefix, i)
            store = EtcdStore(config.etcd_endpoints, prefix)
            image = MetadataImage(store)
            await image.start()
            election = ControllerElection(store, image, config)
            await election.start("127.0.0.1", 1000 + i)
            stores.append(store)
            images.append(image)
            elections.append(election)
        try:
            epochs = []
            live = list(elections)
            for _ in range(3):
                await _until(lambda: sum(e.is_controller for e in live) == 1)
                winner = next(e for e in live if e.is_controller)
                assert winner.record is not None
                epochs.append(winner.record.epoch)
                await winner.stop()  # revokes its lease: the key goes at once
                live.remove(winner)
                if not live:
                    break
            assert epochs == [1, 2, 3]
            assert sum(e.elections_won for e in elections) == 3
        finally:
            for election in elections:
                await election.stop()
            for image in images:
                await image.stop()
            for store in stores:
                store.close()

    run(scenario())
