"""`Consumer` with group.id over gRPC, against the fake gateway plus the fake coordinator's group
RPCs (`group_fakes.GroupGateway`): subscribe → poll reads from the committed offsets (or per
auto.offset.reset, `none` raising NoOffsetForPartitionError), close commits and leaves, a second
member of the group resumes where the first committed, commit_sync/commit_async/committed, and
the calls that need group.id or exclude each other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from client_fakes import FakeServer
from group_fakes import GroupGateway

from riverlog.client import (
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    Producer,
    RiverlogError,
    TopicPartition,
)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer(GroupGateway())
    fake.gateway.create("t", 2)
    try:
        yield fake
    finally:
        fake.stop()


def produce(fake: FakeServer, n: int, start: int = 0) -> None:
    with Producer(bootstrap_servers=fake.address, linger_ms=0) as p:
        for i in range(start, start + n):
            p.send("t", b"v%d" % i, partition=i % 2)


def member(fake: FakeServer, **config: object) -> Consumer:
    conf: dict[str, object] = {
        "bootstrap.servers": fake.address,
        "fetch.max.wait.ms": 10,
        "group.id": "g",
        "auto.offset.reset": "earliest",
        "heartbeat.interval.ms": 100,
    }
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return Consumer(conf)


def drain(c: Consumer, want: int, rounds: int = 60) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    for _ in range(rounds):
        for records in c.poll(timeout_ms=200).values():
            out.extend(records)
        if len(out) >= want:
            break
    return out


def test_subscribe_consume_close_commits_and_the_next_member_resumes(server: FakeServer) -> None:
    produce(server, 20)
    c = member(server)
    c.subscribe(["t"])
    assert c.subscription() == {"t"}
    assert len(drain(c, 20)) == 20
    assert c.assignment() == {TP0, TP1}
    c.close()
    group = server.gateway.group  # type: ignore[attr-defined]
    assert group.offsets == {TP0: (10, ""), TP1: (10, "")}
    assert group.count("leave") == 1
    produce(server, 6, start=20)
    with member(server) as again:
        again.subscribe(["t"])
        records = drain(again, 6)
        assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(20, 26))
        assert again.committed([TP0, TP1]) == {
            TP0: OffsetAndMetadata(10),
            TP1: OffsetAndMetadata(10),
        }


def test_reset_none_without_a_committed_offset_raises(server: FakeServer) -> None:
    produce(server, 4)
    with member(server, auto_offset_reset="none") as c:
        c.subscribe(["t"])
        with pytest.raises(NoOffsetForPartitionError):
            for _ in range(20):
                c.poll(timeout_ms=200)


def test_latest_without_a_committed_offset_skips_old_records(server: FakeServer) -> None:
    produce(server, 4)
    with member(server, auto_offset_reset="latest") as c:
        c.subscribe(["t"])
        assert drain(c, 1, rounds=3) == []
        produce(server, 2, start=4)
        assert sorted(r.value for r in drain(c, 2)) == [b"v4", b"v5"]


def test_commit_sync_async_and_committed(server: FakeServer) -> None:
    produce(server, 10)
    with member(server, enable_auto_commit=False) as c:
        c.subscribe(["t"])
        drain(c, 10)
        c.commit_sync({TP0: 3})
        assert c.committed([TP0, TP1]) == {TP0: OffsetAndMetadata(3), TP1: None}
        outcomes: list[object] = []
        c.commit_async(callback=lambda offsets, error: outcomes.append((offsets, error)))
        for _ in range(50):
            c.poll(timeout_ms=20)
            if outcomes:
                break
        assert outcomes == [({TP0: OffsetAndMetadata(5), TP1: OffsetAndMetadata(5)}, None)]
        assert c.committed([TP1])[TP1] == OffsetAndMetadata(5)


def test_group_calls_need_group_id_and_modes_exclude_each_other(server: FakeServer) -> None:
    with Consumer(bootstrap_servers=server.address) as plain:
        with pytest.raises(RiverlogError, match=r"group\.id"):
            plain.subscribe(["t"])
        with pytest.raises(RiverlogError, match=r"group\.id"):
            plain.commit_sync()
    with member(server) as c:
        c.assign([TP0])
        with pytest.raises(RiverlogError, match="unsubscribe"):
            c.subscribe(["t"])
        c.unsubscribe()
        c.subscribe(["t"])
        with pytest.raises(RiverlogError, match="unsubscribe"):
            c.assign([TP0])
        with pytest.raises(ValueError, match="topics or a pattern"):
            c.subscribe(["t"], pattern="t.*")


def test_pattern_subscription(server: FakeServer) -> None:
    server.gateway.create("other", 1)
    produce(server, 4)
    with member(server) as c:
        c.subscribe(pattern="t|x.*")
        assert len(drain(c, 4)) == 4
        assert c.subscription() == {"t"}
        assert c.assignment() == {TP0, TP1}


def test_position_of_a_group_partition_comes_from_the_committed_offset(
    server: FakeServer,
) -> None:
    produce(server, 10)
    group = server.gateway.group  # type: ignore[attr-defined]
    group.offsets[TP0] = (3, "")
    with member(server) as c:
        c.subscribe(["t"])
        for _ in range(20):
            c.poll(timeout_ms=100, max_records=1)
            if c.assignment():
                break
        assert c.position(TP0) >= 3
        assert c.group_metadata().generation_id >= 1
        assert c.group_metadata().member_id.startswith("member-")


def test_read_committed_members_fetch_only_stable_offsets(server: FakeServer) -> None:
    """KIP-447: under read_committed the committed offsets are asked with require_stable, so
    a member never starts from an offset a pending transaction is replacing."""
    calls = server.gateway.group.calls  # type: ignore[attr-defined]
    with member(server, isolation_level="read_committed") as c:
        c.commit_sync({TP0: 1})
        c.committed([TP0])
    with member(server) as c:
        c.committed([TP0])
    assert [mode for name, mode in calls if name == "fetch"] == ["stable", ""]
