"""Tiered storage on a real S3-compatible server (moto's, its own process) under faults, with
two storage nodes tiering to it through a gate (s3_gate.py) that can hold segment uploads:

- leadership moved by a preferred election while the leader is mid-copy, the old leader alive:
  the new leader cleans up the cut copy and copies on, the old one writes nothing more and
  removes what its cut upload wrote once it ends; nothing is copied twice, every byte reads;
- the server SIGKILLed and restarted with its state (moto's recorder replayed): produce and
  tail fetch go on meanwhile and local data stays past local retention; then the copies
  resume and a read from 0 goes through the server;
- the server SIGKILLed and restarted empty (moto keeps nothing): segments the metadata names
  are gone, so a read of them is a clear error and never other bytes, a fresh replica cannot
  load the metadata, and the leader copies nothing more (keeping its data local and readable)
  rather than start a metadata log no one could load (decision 0039, addendum 5).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from moto_server import MotoServer, moto_server
from s3_gate import S3Gate
from tiered_cluster import (
    StorageHarness,
    assert_same_batches,
    create_tiered_topic,
    elect_preferred,
    fetch_from,
    fetch_once,
    local_segments,
    make_batch,
    produce,
    reassign,
    remote_state,
    tiered_harness,
    wait_until,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.metadata_log import MetadataRecord
from riverlog.services.storage.remote.metadata_manager import (
    RemoteLogMetadataLostError,
    metadata_prefix,
)
from riverlog.services.storage.remote.s3 import S3RemoteStorage
from riverlog.services.storage.remote.segment_metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from riverlog.v1 import common_pb2

pytestmark = [pytest.mark.slow, pytest.mark.fault, pytest.mark.timeout(300)]

BUCKET = "riverlog-faults"
# Record timestamps: now (the module's start), as retention.ms (7 days) would take older ones.
NOW = int(time.time() * 1000)
PREFIX = "cluster"
S = RemoteLogSegmentState


class S3Tier:
    """The module's S3 server behind the gate: a test may kill it and start another (on the
    same port, so the recorder's replay reaches it), which the gate then passes requests to."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root = root
        self.recording = root / "moto-recording.jsonl"
        self._stack = stack
        self.server = self._start(None)
        self.server.create_bucket(BUCKET)
        self.gate = S3Gate(self.server.port)
        stack.callback(self.gate.stop)

    def _start(self, port: int | None) -> MotoServer:
        return self._stack.enter_context(moto_server(self.root, port, self.recording))

    def store(self) -> S3RemoteStorage:
        """A store reading the server directly (the gate holds nothing of it)."""
        return S3RemoteStorage(self.server.store_settings(BUCKET, PREFIX))

    def kill(self) -> None:
        self.server.kill()

    def restart(self, keep_state: bool) -> None:
        """A new server on the old port: with the killed one's objects (the recording
        replayed while the gate answers the nodes 502, as a server not up yet), or empty (a
        bucket made again, as an operator would)."""
        self.gate.upstream_port = 0
        if not keep_state:
            self.recording.unlink(missing_ok=True)
        self.server = self._start(self.server.port)
        if keep_state:
            self.server.replay_recording()
        else:
            self.server.create_bucket(BUCKET)
        self.gate.upstream_port = self.server.port

    def ensure_up(self) -> None:
        if self.server.process.poll() is not None:
            self.restart(keep_state=False)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Tier]:
    with ExitStack() as stack:
        yield S3Tier(tmp_path_factory.mktemp("moto"), stack)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, s3: S3Tier) -> Iterator[StorageHarness]:
    settings = s3.server.store_settings(BUCKET, PREFIX) | {
        "s3.endpoint": s3.gate.endpoint,
        "s3.request.timeout.ms": "30000",  # a held upload waits for the gate, not for this
    }
    harness = tiered_harness(
        tmp_path_factory.mktemp("cluster"),
        {f"rsm.config.{k}": v for k, v in settings.items()}
        | {
            "remote.log.storage.manager.class.name": "s3",
            # No compaction: the tests read every metadata record the leaders wrote.
            "remote.log.metadata.snapshot.interval.records": "100000",
        },
        storage_nodes=2,
    )
    try:
        yield harness
    finally:
        harness.cluster.stop()


@pytest.fixture(autouse=True)
def _server_up(s3: S3Tier) -> Iterator[None]:
    s3.ensure_up()
    yield
    s3.gate.open()


def metadata_records(store: S3RemoteStorage, topic: str) -> list[MetadataRecord]:
    tp = TopicPartition(topic, 0)

    async def read() -> list[MetadataRecord]:
        names = [n for n in await store.list_objects(metadata_prefix(tp)) if "snapshot" not in n]
        return [MetadataRecord.from_bytes(await store.get_object(n) or b"") for n in names]

    return asyncio.run(read())


def orphans(store: S3RemoteStorage, topic: str) -> list[str]:
    """Data objects of the topic whose segment the metadata does not name."""
    live = set(remote_state(store, topic).segments)
    names = asyncio.run(store.list_objects(f"{topic}-0/"))
    data = [n for n in names if "/metadata/" not in n]
    return [n for n in data if n.split("/")[-1].split(".")[0] not in live]


def test_leadership_moved_mid_copy_with_the_old_leader_alive(
    harness: StorageHarness, s3: S3Tier
) -> None:
    """Replication factor 2. The gate holds segment uploads, so the leader stops mid-copy
    (COPY_SEGMENT_STARTED written, its objects in flight). The follower is put first in the
    replica list and a preferred election makes it lead, the old leader alive: the new one
    writes its epoch (fencing the old), removes the cut copy and starts copying. The gate
    opens: the old leader's upload ends, and it removes what it wrote; the new one copies on.
    No copy is left started, no object without its segment, no segment copied twice, every
    record written by the old leader is written after the new one's start, and a read from 0
    gives every batch."""
    topic, leader = create_tiered_topic(harness, "s3-move", replicas=2)
    follower = 3 - leader
    store = s3.store()
    s3.gate.close()
    sent = [make_batch(count=5, tag=i, value_size=200, ts=NOW) for i in range(24)]  # ~6 segments
    produce(harness, topic, sent, node=leader, acks=common_pb2.ACKS_ALL)

    def mid_copy() -> list[RemoteLogSegmentMetadata] | None:
        started = remote_state(store, topic).in_state(S.COPY_SEGMENT_STARTED)
        return started if started and s3.gate.held else None

    [cut] = wait_until(mid_copy, 60, "the leader to be mid-copy")
    old_epoch = cut.event_leader_epoch
    reassign(harness, topic, [follower, leader])
    moved = elect_preferred(harness, topic)
    assert moved.leader == follower and moved.leader_epoch > old_epoch

    def taken_over() -> bool:
        state = remote_state(store, topic)
        started = state.in_state(S.COPY_SEGMENT_STARTED)
        return (
            state.leader_epoch > old_epoch
            and cut.segment_id.id not in state.segments
            and bool(started)
            and all(s.event_leader_epoch > old_epoch for s in started)
        )

    wait_until(taken_over, 60, "the new leader to remove the cut copy and copy on")
    s3.gate.open()
    more = [make_batch(count=5, tag=100 + i, value_size=200, ts=NOW) for i in range(8)]
    produce(harness, topic, more, node=follower, acks=common_pb2.ACKS_ALL)

    def settled() -> bool:
        state = remote_state(store, topic)
        local = local_segments(harness, topic, follower)
        return (
            not state.in_state(S.COPY_SEGMENT_STARTED)
            and len(local) <= 2
            and (state.copied_next_offset() or 0) >= int(local[0].stem)
        )

    wait_until(settled, 90, "the new leader to copy everything closed")
    wait_until(lambda: not orphans(store, topic), 60, "no object without its segment")
    remote = remote_state(store, topic).readable_segments()
    starts = [s.start_offset for s in remote]
    assert starts[0] == 0 and starts == sorted(set(starts))  # nothing copied twice
    for before, after in itertools.pairwise(remote):
        assert before.end_offset < after.end_offset and after.start_offset <= before.next_offset
    records = metadata_records(store, topic)
    taken = next(i for i, r in enumerate(records) if r.leader_epoch > old_epoch)
    assert records[taken].segment is None  # the new leader's EPOCH_START first
    assert all(r.leader_epoch > old_epoch for r in records[taken:])
    assert_same_batches(fetch_from(harness, topic, 0, node=follower), sent + more)


def test_the_s3_server_killed_and_restarted_with_its_state(
    harness: StorageHarness, s3: S3Tier
) -> None:
    """SIGKILL: produce and tail fetch go on, the leader's copies fail and its local segments
    stay past local.retention.bytes. A new server gets the old one's objects back (moto's
    recorder replayed): the copies resume, and a read from 0 gives every batch, the old ones
    through the server."""
    topic, leader = create_tiered_topic(harness, "s3-restart")
    store = s3.store()
    sent = [make_batch(count=5, tag=i, value_size=200, ts=NOW) for i in range(16)]
    produce(harness, topic, sent, node=leader)
    wait_until(lambda: _all_copied(harness, store, topic, leader), 60, "all closed copied")
    more = _while_killed(harness, s3, topic, leader)
    s3.restart(keep_state=True)
    wait_until(lambda: _local(harness, topic, leader), 90, "the copies to resume")
    copied = remote_state(s3.store(), topic).copied_next_offset()  # the restarted server's
    assert copied is not None and copied >= 5 * len(sent)  # the data produced while down too
    assert_same_batches(fetch_from(harness, topic, 0, node=leader), sent + more)


def test_the_s3_server_restarted_empty_is_a_clear_error_and_keeps_local_data(
    harness: StorageHarness, s3: S3Tier
) -> None:
    """SIGKILL, then a new server with an empty bucket: the segments the leader copied are
    gone. A read of them is KAFKA_STORAGE_ERROR naming the missing object, never other bytes;
    a replica loading the partition's metadata afresh finds nothing to read (or the lost
    records) rather than guessing; the leader copies nothing more on top of the lost log (its
    node log says why) and keeps its local segments, so everything since stays readable."""
    topic, leader = create_tiered_topic(harness, "s3-lost")
    store = s3.store()
    sent = [make_batch(count=5, tag=i, value_size=200, ts=NOW) for i in range(16)]
    produce(harness, topic, sent, node=leader)
    wait_until(lambda: _all_copied(harness, store, topic, leader), 60, "all closed copied")
    copied = remote_state(store, topic).copied_next_offset()
    assert copied is not None and copied > 0
    more = _while_killed(harness, s3, topic, leader)
    kept = local_segments(harness, topic, leader)
    s3.restart(keep_state=False)
    wait_until(
        lambda: _node_log_lines(harness, leader, topic, "remote log metadata lost its records"),
        60,
        "the leader to find the metadata log lost",
    )
    assert local_segments(harness, topic, leader)[0] == kept[0]  # nothing more deleted
    lost = fetch_once(harness, topic, 0, node=leader)
    assert lost.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not lost.records
    assert "missing" in lost.error_message, lost.error_message
    assert _fresh_view(s3.store(), topic) == []  # nothing to read, nothing guessed
    assert int(kept[0].stem) <= copied
    tail = fetch_from(harness, topic, copied, node=leader)
    assert_same_batches(tail, (sent + more)[copied // 5 :], first=copied)


def _fresh_view(store: S3RemoteStorage, topic: str) -> list[RemoteLogSegmentMetadata]:
    """The readable segments a replica loading the metadata now would see: none, whether it
    finds the log empty or (between the leader's write and its taking it back) lost."""
    try:
        return remote_state(store, topic).readable_segments()
    except RemoteLogMetadataLostError:
        return []


def _local(harness: StorageHarness, topic: str, node: int) -> bool:
    return len(local_segments(harness, topic, node)) <= 2


def _all_copied(harness: StorageHarness, store: S3RemoteStorage, topic: str, node: int) -> bool:
    """Quiet: every closed segment copied and deleted locally, only the active one left (so
    nothing copied before the server dies is deleted locally after)."""
    local = local_segments(harness, topic, node)
    copied = remote_state(store, topic).copied_next_offset()
    return len(local) == 1 and copied == int(local[0].stem)


def _node_log_lines(harness: StorageHarness, node: int, topic: str, text: str) -> int:
    """How many lines of the node's log name `topic` and say `text`."""
    path = harness.cluster.data_dir / "logs" / f"storage-{node}.log"
    return sum(1 for line in path.read_text().splitlines() if topic in line and text in line)


def _while_killed(harness: StorageHarness, s3: S3Tier, topic: str, leader: int) -> list[bytes]:
    """Kill the server; produce more (acknowledged), fetch the tail, wait for a copy to fail,
    and check the local segments stayed; the batches produced."""
    failures = _node_log_lines(harness, leader, topic, "remote store failed")
    s3.kill()
    more = [make_batch(count=5, tag=100 + i, value_size=200, ts=NOW) for i in range(16)]
    produce(harness, topic, more, node=leader)  # produce goes on
    local = local_segments(harness, topic, leader)
    assert len(local) > 3
    assert fetch_from(harness, topic, int(local[0].stem), node=leader)  # and the tail fetch
    wait_until(
        lambda: _node_log_lines(harness, leader, topic, "remote store failed") > failures,
        60,
        "a copy to fail on the killed server",
    )
    assert local_segments(harness, topic, leader)[0] == local[0]  # kept while uncopied
    return more
