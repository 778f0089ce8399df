"""The S3 RemoteStorageManager against a real S3-compatible server process on loopback (moto's):
the same cases as the directory store (tests/unit/.../remote/rsm_cases.py and the metadata
manager's rlmm_cases.py) over HTTP, objects named under the prefix, a server that is down or
paused surfacing as a RemoteStorageError (the copy task's cue to back off) with the store usable
again once it is back; and a storage node tiering to the server, which keeps its local data
while the server is paused and copies it once the server resumes."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from moto_server import MotoServer, moto_server

from riverlog.services.storage.remote.factory import remote_storage_manager
from riverlog.services.storage.remote.s3 import S3RemoteStorage
from riverlog.services.storage.remote.storage import (
    RemoteLogSegmentId,
    RemoteStorageError,
    RemoteStorageManager,
)
from riverlog.services.storage.remote_log_config import RemoteLogConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit/services/storage/remote"))
from rlmm_cases import CASES as RLMM_CASES
from rsm_cases import CASES, TP, segment_files
from tiered_cluster import (
    TOPIC_CONFIGS,
    assert_same_batches,
    fetch_from,
    local_segments,
    make_batch,
    produce,
    remote_bytes,
    tiered_harness,
    wait_until,
)

pytestmark = pytest.mark.timeout(180)

BUCKET = "riverlog-tier"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with moto_server(tmp_path_factory.mktemp("moto")) as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
async def test_contract(
    case: Callable[[RemoteStorageManager, Path], Awaitable[None]], s3: MotoServer, tmp_path: Path
) -> None:
    await case(S3RemoteStorage(s3.store_settings(BUCKET, "contract")), tmp_path)


@pytest.mark.parametrize("case", RLMM_CASES, ids=lambda c: c.__name__)
async def test_metadata_manager(
    case: Callable[[RemoteStorageManager], Awaitable[None]], s3: MotoServer
) -> None:
    """The metadata log's fencing on S3's conditional create (If-None-Match: *)."""
    await case(S3RemoteStorage(s3.store_settings(BUCKET, f"rlmm-{case.__name__}")))


async def test_objects_are_named_under_the_prefix(s3: MotoServer, tmp_path: Path) -> None:
    config = RemoteLogConfig.from_overrides(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3",
            **{f"rsm.config.{k}": v for k, v in s3.store_settings(BUCKET, "named/").items()},
        }
    )
    store = remote_storage_manager(config)
    assert isinstance(store, S3RemoteStorage)
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, segment_files(tmp_path, txn=False))
    suffixes = [".index", ".leader-epoch-checkpoint", ".log", ".snapshot", ".timeindex"]
    assert await store.list_objects() == sorted(f"orders-3/{seg.id}{s}" for s in suffixes)


async def test_a_missing_bucket_is_a_remote_storage_error(s3: MotoServer, tmp_path: Path) -> None:
    store = S3RemoteStorage(s3.store_settings("no-such-bucket"))
    with pytest.raises(RemoteStorageError, match="copy of"):
        await store.copy_log_segment_data(RemoteLogSegmentId.generate(TP), segment_files(tmp_path))


async def test_a_paused_server_fails_calls_then_serves_again(tmp_path: Path) -> None:
    """Its own server: SIGSTOPped, a copy fails within the request timeout (3 s here) instead
    of hanging; SIGCONTed, the same store copies and reads."""
    with moto_server(tmp_path) as server:
        server.create_bucket(BUCKET)
        store = S3RemoteStorage(server.store_settings(BUCKET))
        data = segment_files(tmp_path / "local")
        seg = RemoteLogSegmentId.generate(TP)
        server.pause()
        try:
            with pytest.raises(RemoteStorageError):
                await store.copy_log_segment_data(seg, data)
        finally:
            server.resume()
        await store.copy_log_segment_data(seg, data)
        assert await store.fetch_log_segment(seg, 0) == data.log_segment.read_bytes()


async def test_a_stopped_server_fails_calls_and_a_restarted_one_serves(tmp_path: Path) -> None:
    with moto_server(tmp_path) as server:
        port = server.port
        settings = server.store_settings(BUCKET)
        server.create_bucket(BUCKET)
    store = S3RemoteStorage(settings)
    seg = RemoteLogSegmentId.generate(TP)
    data = segment_files(tmp_path / "local")
    with pytest.raises(RemoteStorageError):
        await store.copy_log_segment_data(seg, data)
    with moto_server(tmp_path, port=port) as again:
        again.create_bucket(BUCKET)  # moto keeps nothing across a restart
        await store.copy_log_segment_data(seg, data)
        assert await store.fetch_log_segment(seg, 10, 20) == data.log_segment.read_bytes()[10:20]


# -- a storage node tiering to the S3 server -------------------------------------------------


@pytest.mark.slow
def test_a_node_tiers_to_s3_and_keeps_local_data_while_the_server_is_paused(
    tmp_path: Path,
) -> None:
    """Its own S3 server (it is paused) and a one-node cluster tiering to it: segments go to
    the bucket and leave the disk; with the server SIGSTOPped, produce and tail fetch go on and
    local segments stay past local.retention.bytes; SIGCONTed, they are copied and deleted, and
    remote + local is every batch produced."""
    with moto_server(tmp_path) as server:
        server.create_bucket(BUCKET)
        settings = server.store_settings(BUCKET, "cluster")
        harness = tiered_harness(
            tmp_path / "cluster",
            {f"rsm.config.{k}": v for k, v in settings.items()}
            | {"remote.log.storage.manager.class.name": "s3"},
        )
        try:
            store = S3RemoteStorage(settings)
            topic = harness.create_topic("tiered-s3", configs=TOPIC_CONFIGS).name
            now = int(time.time() * 1000)
            sent = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(30)]
            produce(harness, topic, sent)
            wait_until(
                lambda: (
                    remote_bytes(store, topic)[1] > 0 and len(local_segments(harness, topic)) <= 2
                ),
                60,
                "segments copied to S3 and deleted locally",
            )
            node_log = harness.cluster.data_dir / "logs" / "storage-1.log"
            failures_before = node_log.read_text().count("remote store failed")
            # Segments from the active one on cannot have been copied before the pause (a closed
            # one still local may be, and then leaves by local retention: not what is checked).
            active_at_pause = _base(local_segments(harness, topic)[-1])
            server.pause()
            try:
                more = [make_batch(count=5, tag=100 + i, value_size=200, ts=now) for i in range(30)]
                produce(harness, topic, more)  # produce goes on
                local = [p for p in local_segments(harness, topic) if _base(p) >= active_at_pause]
                assert len(local) > 4
                tail = fetch_from(harness, topic, _base(local[0]))  # and so does the tail fetch
                assert tail
                wait_until(
                    lambda: node_log.read_text().count("remote store failed") > failures_before,
                    60,
                    "a copy to fail on the paused server",
                )
                assert set(local) <= set(local_segments(harness, topic))  # kept while uncopied
            finally:
                server.resume()
            wait_until(lambda: len(local_segments(harness, topic)) <= 2, 90, "the copies to resume")
            remote, copied = remote_bytes(store, topic)
            assert_same_batches(remote + fetch_from(harness, topic, copied), sent + more)
            assert_same_batches(fetch_from(harness, topic, 0), sent + more)  # through S3
        finally:
            harness.cluster.stop()


def _base(path: Path) -> int:
    return int(path.stem)
