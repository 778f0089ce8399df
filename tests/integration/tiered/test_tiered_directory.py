"""Tiered storage end to end on real processes with the directory store: a storage node with
`remote.log.storage.system.enable` copies the closed segments of a `remote.storage.enable`
topic to the directory, deletes them locally by `local.retention.bytes` once copied, and
what is remote plus what is local is every batch produced, byte for byte, read back from 0
through the remote tier; DescribeLogDirs reports the remote size and the local log start;
deleting the topic deletes its remote data. Also: DeleteRecords into the remote tier, the
metadata log's compaction, a wiped follower that takes the producer state from the remote tier
and leads, a replica added by a reassignment that copies only the local tail, and a leader
killed mid-copy."""

from __future__ import annotations

import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tiered_cluster import (
    METADATA_SNAPSHOT_INTERVAL,
    StorageHarness,
    assert_same_batches,
    create_tiered_topic,
    fetch_error,
    fetch_from,
    local_segments,
    make_batch,
    partition_state,
    produce,
    produce_request,
    reassign,
    remote_bytes,
    remote_state,
    tiered_harness,
    wait_until,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.header import iter_batches
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.metadata_log import RemotePartitionMetadata
from riverlog.services.storage.remote.segment_metadata import RemoteLogSegmentState
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, storage_pb2

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PRODUCER_ID = 7_000_001


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tier")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, tier: Path) -> Iterator[StorageHarness]:
    harness = tiered_harness(
        tmp_path_factory.mktemp("cluster"), {"rsm.config.dir": str(tier)}, storage_nodes=2
    )
    try:
        yield harness
    finally:
        harness.cluster.stop()


def test_segments_are_copied_and_deleted_locally_keeping_every_byte(
    harness: StorageHarness, tier: Path
) -> None:
    topic, leader = create_tiered_topic(harness, "tiered-dir")
    store = DirectoryRemoteStorage(tier)
    now = int(time.time() * 1000)  # retention.ms (7 days) would take older records at once
    sent = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(60)]  # ~1 KB
    produce(harness, topic, sent, node=leader)

    def tiered() -> int | None:
        _, copied = remote_bytes(store, topic)
        local = local_segments(harness, topic, leader)
        return copied if copied > 0 and len(local) <= 2 else None

    copied = wait_until(tiered, 60, "segments copied and deleted locally")
    remote, copied = remote_bytes(store, topic)
    assert_same_batches(remote + fetch_from(harness, topic, copied, node=leader), sent)
    # ListOffsets: earliest is the log start (remote), earliest-local the first local offset;
    # by timestamp, the remote tier is searched first.
    spec = common_pb2.OffsetSpec
    with harness.storage(leader) as stub:
        listed = stub.ListOffsets(
            data_pb2.ListOffsetsRequest(
                partitions=[
                    data_pb2.ListOffsetsPartition(topic=topic, spec=spec.OFFSET_SPEC_EARLIEST),
                    data_pb2.ListOffsetsPartition(
                        topic=topic, spec=spec.OFFSET_SPEC_EARLIEST_LOCAL
                    ),
                    data_pb2.ListOffsetsPartition(topic=topic, timestamp_ms=-4),
                    data_pb2.ListOffsetsPartition(topic=topic, timestamp_ms=now),  # remote
                ]
            ),
            timeout=10,
        )
    local_start = int(local_segments(harness, topic, leader)[0].stem)
    assert [p.offset for p in listed.partitions] == [0, local_start, local_start, 0]

    # DescribeLogDirs (decision 0040; the gateway passes these on): the replica's bytes in
    # the remote tier are the copied segments', its local start where local retention left it
    # (a last closed segment may still be copied meanwhile: compared once both agree).
    def described() -> storage_pb2.DescribeLogDirsResponse.PartitionInfo | None:
        with harness.storage(leader) as stub:
            dirs = stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=10)
        [replica] = [p for d in dirs.log_dirs for p in d.partitions if p.topic == topic]
        first_local = int(local_segments(harness, topic, leader)[0].stem)
        in_store = len(remote_bytes(store, topic)[0])
        agree = (replica.remote_size_bytes, replica.local_log_start_offset) == (
            in_store,
            first_local,
        )
        return replica if agree else None

    replica = wait_until(described, 30, "DescribeLogDirs to match the store and the local log")
    assert replica.remote_size_bytes > 0 and replica.log_start_offset == 0
    assert replica.local_log_start_offset > 0 and not replica.is_future
    # A consumer from the beginning reads the remote segments, then the local ones: the same
    # bytes, over gRPC and over the zero-copy channel.
    assert_same_batches(fetch_from(harness, topic, 0, node=leader), sent)
    with harness.zero_copy(leader) as client:
        assert_same_batches(fetch_from(harness, topic, 0, client.fetch, leader), sent)
    # The tiering families on the leader's /metrics (a last closed segment may still be copied
    # meanwhile: the remote size is compared with the store's once both agree).
    url = harness.cluster.storage(leader).metrics_url
    assert url is not None

    def scrape() -> dict | None:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found = {f.name: f for f in text_string_to_metric_families(text)}
        size = [
            s.value
            for s in found["riverlog_remote_log_size_bytes"].samples
            if s.labels["topic"] == topic
        ]
        return found if size == [len(remote_bytes(store, topic)[0])] else None

    families = wait_until(scrape, 30, "the remote size gauge to match the store")
    node = {"node_id": str(leader)}
    [copied] = families["riverlog_remote_copy_bytes"].samples
    assert copied.labels == node and copied.value >= len(remote)
    [reads] = families["riverlog_remote_fetch_requests"].samples
    assert reads.value > 0
    lookups = {
        s.labels["result"]: s.value for s in families["riverlog_remote_cache_lookups"].samples
    }
    assert lookups["hit"] > 0 and lookups["miss"] > 0

    harness.delete_topic(topic)
    wait_until(
        lambda: (
            not (tier / f"{topic}-0").exists()
            or not any(p.is_file() for p in (tier / f"{topic}-0").rglob("*"))
        ),
        60,
        "the remote data of the deleted topic to go",
    )


def test_a_restarted_node_still_serves_the_remote_records_and_delete_records_goes_below(
    harness: StorageHarness, tier: Path
) -> None:
    """The log start stays below the local log start across a restart (the checkpointed
    start is taken back once the topic's configs say it is tiered). Then DeleteRecords to an
    offset inside the remote tier moves the log start at once (ListOffsets earliest, a fetch
    below it is OFFSET_OUT_OF_RANGE, a fetch from it reads the remote tier) and the remote
    segments wholly below it are deleted, objects and all."""
    topic, leader = create_tiered_topic(harness, "tiered-restart")
    store = DirectoryRemoteStorage(tier)
    now = int(time.time() * 1000)
    sent = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(30)]
    produce(harness, topic, sent, node=leader)
    wait_until(
        lambda: remote_bytes(store, topic)[1] and len(local_segments(harness, topic, leader)) <= 2,
        60,
        "segments copied and deleted locally",
    )
    harness.cluster.storage(leader).restart()
    harness.wait_for_leaders(topic, 1)
    all_bytes = wait_until(lambda: fetch_from(harness, topic, 0, node=leader), 60, "a fetch from 0")
    assert_same_batches(all_bytes, sent)

    remote = remote_state(store, topic).readable_segments()
    assert len(remote) >= 3
    target = remote[2].start_offset + 2  # inside the third remote segment
    with harness.storage(leader) as stub:
        part = data_pb2.DeleteRecordsPartition(topic=topic, offset=target)
        request = data_pb2.DeleteRecordsRequest(partitions=[part], timeout_ms=10_000)
        [deleted] = stub.DeleteRecords(request, timeout=30).partitions
        assert deleted.error_code == ErrorCode.NONE, deleted.error_message
        assert deleted.low_watermark == target
        earliest = data_pb2.ListOffsetsPartition(
            topic=topic, spec=common_pb2.OffsetSpec.OFFSET_SPEC_EARLIEST
        )
        listed = stub.ListOffsets(data_pb2.ListOffsetsRequest(partitions=[earliest]), timeout=10)
        assert [p.offset for p in listed.partitions] == [target]
    assert fetch_error(harness, topic, 0, node=leader) == ErrorCode.OFFSET_OUT_OF_RANGE
    from_target = fetch_from(harness, topic, target, node=leader)
    first = iter_batches(from_target)[0]
    assert first.base_offset <= target < first.next_offset
    assert from_target == all_bytes[len(all_bytes) - len(from_target) :]

    def remote_gone() -> bool:
        live = remote_state(store, topic).readable_segments()
        objects = [p.name for p in (tier / f"{topic}-0").iterdir() if p.is_file()]
        return live[0].segment_id == remote[2].segment_id and not [
            n for s in remote[:2] for n in objects if n.startswith(s.segment_id.id)
        ]

    wait_until(remote_gone, 60, "the remote segments below the new log start to go")


def test_the_metadata_log_stays_bounded_as_segments_expire(
    harness: StorageHarness, tier: Path
) -> None:
    """retention.bytes over the whole log expires remote segments as new ones are copied:
    four metadata records each, but the leader's compactions (a snapshot every
    METADATA_SNAPSHOT_INTERVAL records here) keep the metadata objects bounded, and the
    state replayed from the snapshot still reads the retained records."""
    topic, leader = create_tiered_topic(harness, "tiered-compact")
    store = DirectoryRemoteStorage(tier)
    now = int(time.time() * 1000)
    # Three batches fill a segment. How many segments get copied (two metadata records each,
    # two more when they expire) depends on how far the copy lags the producer: the total
    # retention deletes local segments the copy has not reached (decision 0039), which a
    # loaded machine makes frequent. So produce until the leader has written three snapshot
    # intervals of records, not a fixed amount (72 batches are enough on an idle machine).
    sent: list[bytes] = []
    while len(sent) < 72 or remote_state(store, topic).next_seq < 3 * METADATA_SNAPSHOT_INTERVAL:
        assert len(sent) < 720, "the leader copied too few segments to its remote store"
        chunk = [make_batch(count=5, tag=len(sent) + i, value_size=200, ts=now) for i in range(12)]
        produce(harness, topic, chunk, node=leader)
        sent += chunk
    metadata = tier / f"{topic}-0" / "metadata"

    # retention.bytes only once every closed segment is copied: set during the burst, the total
    # retention could take local segments before the leader's next round copied them (a race
    # this test lost now and then), leaving fewer metadata records than it counts on.
    def all_copied() -> bool:
        active = int(local_segments(harness, topic, leader)[-1].stem)
        return (remote_state(store, topic).copied_next_offset() or 0) >= active

    wait_until(all_copied, 60, "every closed segment to be copied")
    op = admin_pb2.AlterConfigsRequest.Op(name="retention.bytes", value="12288")
    alter = admin_pb2.AlterConfigsRequest(
        topics=[admin_pb2.AlterConfigsRequest.Topic(name=topic, ops=[op])]
    )
    with harness.metadata() as stub:
        [result] = stub.AlterConfigs(alter, timeout=30).topics
    assert result.error_code == ErrorCode.NONE, result.error_message

    def objects() -> list[str]:
        return [p.name for p in metadata.iterdir() if p.suffix == ".json"]

    def snapshot_seq() -> int:
        snapshots = [name for name in objects() if name.startswith("snapshot-")]
        return max((int(name[len("snapshot-") : -len(".json")]) for name in snapshots), default=-1)

    def nothing_over_retention(state: RemotePartitionMetadata, copied: int) -> bool:
        """Retention's own rule (tiered_retention.remote_expired_segments): the oldest remote
        segment goes while the remote bytes plus the local ones not copied exceed
        retention.bytes by at least its size."""
        readable = state.readable_segments()
        local = sum(
            p.stat().st_size
            for p in local_segments(harness, topic, leader)
            if int(p.stem) >= copied
        )
        excess = state.size_bytes() + local - 12288
        return not readable or excess < readable[0].segment_size_bytes

    def settled() -> RemotePartitionMetadata | None:
        """The remote state once the leader's remote log task has nothing left to do: every
        closed segment copied (the copy lags the producer under load, so the oldest local
        segment is not yet the active one), no copy or delete half done, nothing more over
        retention.bytes, and no compaction due. Checked before it, the state can still move
        (a copy, an expiry, a compaction's snapshot written before its deletes)."""
        state = remote_state(store, topic)
        active = int(local_segments(harness, topic, leader)[-1].stem)
        copied = state.copied_next_offset() or 0
        snapshot = snapshot_seq()
        done = (
            state.next_seq >= 3 * METADATA_SNAPSHOT_INTERVAL
            and copied >= active
            and not state.in_state(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
            and not state.in_state(RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
            and state.size_bytes() <= 12288
            and nothing_over_retention(state, copied)
            and 0 <= state.next_seq - snapshot < METADATA_SNAPSHOT_INTERVAL
            and len(objects()) <= METADATA_SNAPSHOT_INTERVAL + 1  # the deletes done
        )
        return state if done else None

    state = wait_until(settled, 90, "segments to be copied, expired and the metadata compacted")
    assert len(objects()) <= METADATA_SNAPSHOT_INTERVAL + 1 < state.next_seq
    start = state.log_start_offset()
    assert start is not None and start > 0
    stored = fetch_from(harness, topic, start, node=leader)
    headers = iter_batches(stored)
    assert [h.base_offset for h in headers] == list(range(start, 5 * len(sent), 5))
    pos = 0
    for header, batch in zip(headers, sent[start // 5 :], strict=True):
        assert stored[pos + 17 : pos + header.size] == batch[17:]
        pos += header.size


def test_a_reassigned_replica_copies_only_the_local_tail_and_serves_every_record(
    harness: StorageHarness, tier: Path
) -> None:
    """Partition reassignment (KIP-455, decision 0021) of a tiered topic: the replica added on
    the other node starts at the leader's local log start (OFFSET_MOVED_TO_TIERED_STORAGE, with
    the leader epochs below it from the remote tier: remote/aux_state.py), not at 0, and joins
    the ISR. Then the old replica is removed (leadership moves to the new one): a consumer from
    0 reads the remote part through the new leader, the same bytes."""
    topic, leader = create_tiered_topic(harness, "tiered-reassign")
    other = 3 - leader
    store = DirectoryRemoteStorage(tier)
    now = int(time.time() * 1000)
    sent = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(40)]
    produce(harness, topic, sent, node=leader)
    wait_until(
        lambda: remote_bytes(store, topic)[1] and len(local_segments(harness, topic, leader)) <= 2,
        60,
        "segments copied and deleted locally",
    )
    leader_start = int(local_segments(harness, topic, leader)[0].stem)
    assert leader_start > 0

    reassign(harness, topic, [leader, other])  # waits for the new replica in the ISR
    first_local = int(local_segments(harness, topic, other)[0].stem)
    assert first_local >= leader_start  # only the local tail was copied, never offset 0
    checkpoint = (harness.log_dir(other) / f"{topic}-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint.splitlines()[2].split()[1] == "0"  # epochs from 0, from the remote tier

    reassign(harness, topic, [other])  # the move: the old replica goes, `other` leads
    assert partition_state(harness, topic).leader == other
    assert_same_batches(fetch_from(harness, topic, 0, node=other), sent)
    gone = harness.log_dir(leader) / f"{topic}-0"
    wait_until(lambda: not gone.exists(), 30, "the old replica's files to go")


def idempotent_batch(seq: int, ts: int, count: int = 5) -> bytes:
    builder = BatchBuilder(producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq)
    for i in range(count):
        builder.append(ts + i, b"key-p-%d" % (seq + i), b"%d|" % (seq + i) + b"p" * 200)
    return builder.build()


def test_a_wiped_follower_copies_only_the_local_tail_and_leads_with_the_remote_state(
    harness: StorageHarness, tier: Path
) -> None:
    """Replication factor 2: an idempotent producer writes several segments, then other data
    fills more; the follower learns what the leader copied and deletes its own copied segments;
    then its disk is wiped and it restarts: it starts at the leader's local log start
    (OFFSET_MOVED_TO_TIERED_STORAGE), not at 0, taking the producer snapshot and the leader
    epochs below it from the remote tier, rejoins the ISR, and reads from 0 through it still
    give every batch. The old leader is killed: the wiped node leads and still knows the
    producer, whose batches are all below its local start: a retry of the last acknowledged
    batch is deduplicated (its first offsets again), a sequence gap is refused and the next
    sequence is taken."""
    topic, leader = create_tiered_topic(harness, "tiered-rf2", replicas=2)
    follower = 3 - leader
    now = int(time.time() * 1000)
    idempotent = [idempotent_batch(5 * i, now) for i in range(16)]  # ~4 segments
    first_offsets = []
    with harness.storage(leader) as stub:
        for batch in idempotent:
            reply = harness.produce_when_ready(stub, topic, 0, batch)
            assert reply.error_code == ErrorCode.NONE, reply.error_message
            first_offsets.append(reply.base_offset)
    filler = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(44)]
    produce(harness, topic, filler, node=leader)
    sent = idempotent + filler
    store = DirectoryRemoteStorage(tier)
    wait_until(
        lambda: (
            remote_bytes(store, topic)[1] > first_offsets[-1] + 5
            and len(local_segments(harness, topic, leader)) <= 2
            and len(local_segments(harness, topic, follower)) <= 2
        ),
        60,
        "both replicas to delete their copied segments",
    )
    process = harness.cluster.storage(follower)
    process.stop()
    shutil.rmtree(harness.log_dir(follower) / f"{topic}-0")
    process.start()
    process.wait_ready()
    leader_start = int(local_segments(harness, topic, leader)[0].stem)
    assert leader_start > first_offsets[-1]  # the producer's batches are remote only

    def rejoined() -> bool:
        described = harness.describe_topic(topic)
        return described is not None and follower in described.partitions[0].isr

    wait_until(rejoined, 90, "the wiped follower to rejoin the ISR")
    first_local = int(local_segments(harness, topic, follower)[0].stem)
    assert first_local >= leader_start  # only the tail was copied
    assert_same_batches(fetch_from(harness, topic, 0, node=leader), sent)
    # Its leader epoch cache starts where the log does (from the remote tier), not where its
    # local copy begins.
    checkpoint = (harness.log_dir(follower) / f"{topic}-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint.splitlines()[2].split()[1] == "0"

    harness.cluster.storage(leader).kill()
    try:

        def new_leader() -> bool:
            described = harness.describe_topic(topic)
            return described is not None and described.partitions[0].leader == follower

        wait_until(new_leader, 60, "the wiped follower to take over")
        end = int(first_offsets[-1]) + 5 + 5 * len(filler)
        with harness.storage(follower) as stub:
            retry = harness.produce_when_ready(stub, topic, 0, idempotent[-1])
            assert retry.error_code == ErrorCode.NONE, retry.error_message
            assert retry.base_offset == first_offsets[-1]  # deduplicated, not written again
            gap = stub.Produce(produce_request(topic, 0, idempotent_batch(90, now)), timeout=10)
            assert gap.partitions[0].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            following = stub.Produce(
                produce_request(topic, 0, idempotent_batch(80, now)), timeout=10
            ).partitions[0]
            assert following.error_code == ErrorCode.NONE, following.error_message
            assert following.base_offset == end
    finally:
        process = harness.cluster.storage(leader)
        process.start()
        process.wait_ready()


def test_the_leader_killed_while_copying_leaves_no_orphan_and_the_new_leader_goes_on(
    harness: StorageHarness, tier: Path
) -> None:
    """Replication factor 2, acks=all: the leader is SIGKILLed while it copies segments (a
    copy may be cut anywhere); the follower takes over, removes any COPY_SEGMENT_STARTED the
    old leader left (its objects too), copies on from where the old leader stopped, and a fetch
    from 0 reads every acknowledged batch."""
    topic, leader = create_tiered_topic(harness, "tiered-failover", replicas=2)
    follower = 3 - leader
    store = DirectoryRemoteStorage(tier)
    now = int(time.time() * 1000)
    sent = [make_batch(count=5, tag=i, value_size=200, ts=now) for i in range(80)]
    produce(harness, topic, sent, node=leader, acks=common_pb2.ACKS_ALL)
    wait_until(lambda: remote_state(store, topic).next_seq > 3, 60, "copies under way")
    process = harness.cluster.storage(leader)
    process.kill()
    try:

        def new_leader() -> bool:
            described = harness.describe_topic(topic)
            return described is not None and described.partitions[0].leader == follower

        wait_until(new_leader, 60, "the follower to take over")
        more = [make_batch(count=5, tag=500 + i, value_size=200, ts=now) for i in range(40)]
        produce(harness, topic, more, node=follower, acks=common_pb2.ACKS_ALL)

        def settled() -> bool:
            state = remote_state(store, topic)
            started = state.in_state(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
            return (
                not started
                and state.leader_epoch >= 1
                and len(local_segments(harness, topic, follower)) <= 2
            )

        wait_until(settled, 90, "the new leader to clean up and copy on")
        state = remote_state(store, topic)
        live = {s.segment_id.id for s in state.segments.values()}
        names = [p.name for p in (tier / f"{topic}-0").iterdir() if p.is_file()]
        orphans = [n for n in names if n.split(".")[0] not in live]
        assert orphans == []  # every object belongs to a segment the metadata names
        assert_same_batches(fetch_from(harness, topic, 0, node=follower), sent + more)
    finally:
        process.start()
        process.wait_ready()
