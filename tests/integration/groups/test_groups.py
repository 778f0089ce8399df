"""Consumer groups on the session cluster (real etcd, metadata, storage, coordinator and gateway
processes), through the SDK and the CLI: three members share twelve partitions with no
partition owned by two members in one generation and every record read (eager and
cooperative); a member killed with SIGKILL has its partitions given to a successor after its
session timeout, and the successor resumes at the committed offsets; a static member that
restarts gets its partitions back with no rebalance; a pattern subscription picks up a new
matching topic; a member that stops polling leaves and rejoins at its next poll; a commit
with an old generation is refused (ILLEGAL_GENERATION); the
`consume --group` and `groups` commands round trip, and `consume --group` leaves cleanly on
Ctrl-C having committed exactly what it printed. The tests of SDK consumers run against both
SDK flavours, the sync `Consumer` and `AIOConsumer` (the `sdk` fixture, sdk_flavours.py); the
killed member is a sync consumer in a process of its own in both, its successor the flavour's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from typing import Any

import pytest
from group_support import create_topic, start_member
from sdk_flavours import Sdk

from riverlog.client import (
    AdminClient,
    ConsumerRebalanceListener,
    Producer,
    TopicPartition,
)
from riverlog.client._connection import GatewayConnection
from riverlog.client.consumer.group.api import CommitRequest, GroupMember, OffsetAndMetadata
from riverlog.client.consumer.group.grpc_api import GatewayGroupApi
from riverlog.cluster import unique_topic_name
from riverlog.common.errors import ErrorCode

pytestmark = pytest.mark.integration

WAIT_S = 90.0


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(partitions * per_partition):
            p.send(topic, b"v%d" % i, partition=i % partitions)
        p.flush()


@dataclass
class Member:
    """An SDK consumer polling in a thread, recording what it was assigned per generation and
    which records it read."""

    consumer: Any  # a Consumer, or an AIOConsumer behind its method names
    topic: str
    assignments: list[tuple[int, frozenset[TopicPartition]]] = field(default_factory=list)
    read: set[tuple[int, int]] = field(default_factory=set)
    records: set[tuple[str, int, int]] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> Member:
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
                generation = member.consumer.group_metadata().generation_id
                member.assignments.append((generation, frozenset(member.consumer.assignment())))

        self.consumer.subscribe([self.topic], listener=Listener())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                for records in self.consumer.poll(timeout_ms=200).values():
                    self.read.update((r.partition, r.offset) for r in records)
                    self.records.update((r.topic, r.partition, r.offset) for r in records)
        except BaseException as e:
            self.error = e

    def halt(self, close: bool = True) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
        if close:
            self.consumer.close()


def consumer(sdk: Sdk, bootstrap: str, group: str, **conf: object) -> Any:
    base: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "auto.commit.interval.ms": 200,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return sdk.Consumer(base)


def wait_for(condition: object, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        if not m.stop.is_set():
            m.halt()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_share_twelve_partitions(
    sdk: Sdk, bootstrap: str, members: list[Member], strategy: str
) -> None:
    topic = create_topic(bootstrap, f"share-{strategy}", 12)
    produce(bootstrap, topic, 12, 50)
    group = f"{topic}-g"  # each flavour's run a group of its own
    for _ in range(3):
        c = consumer(sdk, bootstrap, group, partition_assignment_strategy=strategy)
        members.append(Member(c, topic).start())
    every = {(p, o) for p in range(12) for o in range(50)}

    def settled() -> bool:
        read = set().union(*(m.read for m in members))
        shares = [m.consumer.assignment() for m in members]
        return read >= every and all(len(s) == 4 for s in shares)

    wait_for(settled, "every record read and 4 partitions per member")
    for m in members:
        m.halt()
        assert m.error is None, m.error
    by_generation: dict[int, list[frozenset[TopicPartition]]] = {}
    for m in members:
        latest: dict[int, frozenset[TopicPartition]] = {}
        for generation, owned in m.assignments:
            latest[generation] = owned  # cooperative: the last call of a generation holds all
        for generation, owned in latest.items():
            by_generation.setdefault(generation, []).append(owned)
    for generation, shares in by_generation.items():
        owned = [tp for share in shares for tp in share]
        assert len(owned) == len(set(owned)), f"generation {generation}: {shares}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in committed.items()} == dict.fromkeys(range(12), 50)


def _committed_lines(proc: subprocess.Popen[str], want: int) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + WAIT_S
    while len([x for x in lines if x.startswith("COMMITTED")]) < want:
        if time.monotonic() > deadline:
            raise AssertionError(f"the member process committed too little: {lines}")
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the member process ended: {lines}")
        lines.append(line.strip())
    return lines


def test_killed_member_is_replaced_and_its_successor_resumes_at_the_committed_offsets(
    sdk: Sdk, bootstrap: str, members: list[Member]
) -> None:
    topic = create_topic(bootstrap, "kill", 4)
    produce(bootstrap, topic, 4, 200)
    group = f"{topic}-g"  # each flavour's run a group of its own
    proc = start_member(bootstrap, topic, group, "0.2")
    try:
        lines = _committed_lines(proc, 5)
        assert lines[0].startswith("ASSIGNED")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}
    printed: dict[int, int] = {}
    for line in lines:
        if line.startswith("COMMITTED"):
            for item in line.split()[1].split(","):
                partition, offset = item.split(":")
                printed[int(partition)] = int(offset)
    for partition, offset in printed.items():
        assert committed[partition] >= offset  # what was printed had been committed
    assert sum(committed.values()) < 800  # killed half-way
    successor = Member(consumer(sdk, bootstrap, group, session_timeout_ms=3000), topic).start()
    members.append(successor)
    wait_for(lambda: len(successor.consumer.assignment()) == 4, "the successor owning all 4")
    wait_for(lambda: len(successor.read) >= 800 - sum(committed.values()), "the rest read")
    successor.halt()
    assert successor.error is None, successor.error
    for partition in range(4):
        offsets = sorted(o for p, o in successor.read if p == partition)
        start = committed.get(partition, 0)
        assert offsets == list(range(start, 200)), f"partition {partition} resumed elsewhere"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        description = admin.describe_groups([group])[group]
    assert description.state == "Empty"  # the successor left; the dead member is gone


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(
    sdk: Sdk, bootstrap: str, members: list[Member]
) -> None:
    topic = create_topic(bootstrap, "static", 4)
    group = f"{topic}-g"  # each flavour's run a group of its own
    conf = {"session_timeout_ms": 20_000, "partition_assignment_strategy": "range"}
    first = Member(consumer(sdk, bootstrap, group, group_instance_id="s1", **conf), topic).start()
    other = Member(consumer(sdk, bootstrap, group, group_instance_id="s2", **conf), topic).start()
    members.extend([first, other])
    wait_for(
        lambda: len(first.consumer.assignment()) == len(other.consumer.assignment()) == 2,
        "two partitions each",
    )
    time.sleep(1.0)  # let any rebalance in flight finish
    mine = first.consumer.assignment()
    generation = first.consumer.group_metadata().generation_id
    assert other.consumer.group_metadata().generation_id == generation
    first.halt()  # a static member's close sends no LeaveGroup
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        still = admin.describe_groups([group])[group]
    assert sorted(m.group_instance_id or "" for m in still.members) == ["s1", "s2"]
    again = Member(consumer(sdk, bootstrap, group, group_instance_id="s1", **conf), topic).start()
    members.append(again)
    wait_for(lambda: bool(again.consumer.assignment()), "the restarted member's assignment")
    assert again.consumer.assignment() == mine
    assert again.consumer.group_metadata().generation_id == generation  # no rebalance
    assert other.consumer.group_metadata().generation_id == generation
    assert [g for g, _ in other.assignments] == [generation]


def test_pattern_subscription_picks_up_a_new_matching_topic(
    sdk: Sdk, bootstrap: str, members: list[Member]
) -> None:
    token = unique_topic_name("pattern")
    first = create_topic(bootstrap, "", 2, name=f"{token}-a")
    produce(bootstrap, first, 2, 5)
    c = consumer(sdk, bootstrap, f"{token}-g", metadata_max_age_ms=500)
    m = Member(c, first)
    members.append(m)
    c.subscribe(pattern=re.escape(token) + r"-.*")
    m.thread = threading.Thread(target=m._run, daemon=True)
    m.thread.start()
    wait_for(lambda: len(m.read) >= 10, "the first topic read")
    second = create_topic(bootstrap, "", 3, name=f"{token}-b")
    produce(bootstrap, second, 3, 5)
    wait_for(lambda: len(c.assignment()) == 5, "the new topic's partitions assigned")
    wait_for(lambda: len(m.records) >= 25, "the new topic read")
    m.halt()
    assert m.error is None, m.error
    assert c.subscription() == {first, second}


def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll(
    sdk: Sdk,
    bootstrap: str,
) -> None:
    topic = create_topic(bootstrap, "poll-timeout", 2)
    group = f"{topic}-g"
    events: list[str] = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
            events.append("assigned")

        def on_partitions_lost(self, partitions: Set[TopicPartition]) -> None:
            events.append("lost")

    with consumer(sdk, bootstrap, group, max_poll_interval_ms=1500) as c:
        c.subscribe([topic], listener=Listener())

        def polled(count: int) -> bool:
            c.poll(timeout_ms=100)
            return events.count("assigned") >= count

        wait_for(lambda: polled(1), "an assignment")
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            assert len(admin.describe_groups([group])[group].members) == 1
            # no poll() for longer than max.poll.interval.ms: the heartbeat thread leaves
            wait_for(
                lambda: admin.describe_groups([group])[group].state == "Empty",
                "the member to leave on its poll timeout",
                timeout_s=30,
            )
            wait_for(lambda: polled(2), "the rejoin at the next poll")
            assert events[:3] == ["assigned", "lost", "assigned"]
            assert admin.describe_groups([group])[group].state == "Stable"


def riverlog(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", *args, "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(300)  # eleven CLI processes, three of them waiting out --timeout-ms
def test_cli_consume_group_and_groups_commands_round_trip(bootstrap: str) -> None:
    topic = create_topic(bootstrap, "cli", 3)
    produce(bootstrap, topic, 3, 10)
    group = f"{topic}-group"  # the session cluster is shared: names are the test's own
    consume = ("consume", topic, "--group", group, "--from-beginning", "--timeout-ms", "5000")
    done = riverlog(*consume, "--max-messages", "12", bootstrap=bootstrap)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 12
    assert "Assigned partitions:" in done.stderr
    assert "Processed a total of 12 messages" in done.stderr

    done = riverlog("groups", "list", bootstrap=bootstrap)
    assert done.returncode == 0 and group in done.stdout, done.stderr
    done = riverlog("groups", "describe", group, "--json", bootstrap=bootstrap)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["state"] == "Empty"
    assert sum(r["current_offset"] for r in doc["partitions"]) == 12
    assert all(r["log_end_offset"] == 10 for r in doc["partitions"])
    assert all(r["lag"] == 10 - r["current_offset"] for r in doc["partitions"])

    done = riverlog(*consume, bootstrap=bootstrap)  # the rest, from the committed offsets
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 18, done.stderr

    reset = ("groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    done = riverlog(*reset, bootstrap=bootstrap)
    assert done.returncode == 0 and "dry run" in done.stderr
    done = riverlog(*reset, "--execute", bootstrap=bootstrap)
    assert done.returncode == 0, done.stderr
    done = riverlog("groups", "describe", group, "--json", bootstrap=bootstrap)
    assert all(r["current_offset"] == 0 for r in json.loads(done.stdout)["partitions"])
    done = riverlog(*consume, bootstrap=bootstrap)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 30, done.stderr

    done = riverlog("groups", "delete", group, bootstrap=bootstrap)
    assert done.returncode == 0 and "successful" in done.stdout, done.stderr
    done = riverlog("groups", "list", bootstrap=bootstrap)
    assert group not in done.stdout


def test_cli_consume_group_leaves_cleanly_on_ctrl_c(bootstrap: str) -> None:
    topic = create_topic(bootstrap, "cli-int", 2)
    produce(bootstrap, topic, 2, 10)
    group = f"{topic}-g"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "riverlog.cli.main",
            "consume",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--follow",
            "--bootstrap",
            bootstrap,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(WAIT_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert "Assigned partitions" in proc.stderr.readline()
        printed = [proc.stdout.readline() for _ in range(20)]
        assert all(line.startswith("v") for line in printed)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    assert "Processed a total of 20 messages" in err
    assert out == ""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        description = admin.describe_groups([group])[group]
        committed = admin.list_group_offsets(group)
    assert description.state == "Empty" and not description.members  # it left
    assert sum(om.offset for om in committed.values()) == 20  # everything printed, committed


def test_a_commit_from_an_old_generation_is_refused(sdk: Sdk, bootstrap: str) -> None:
    topic = create_topic(bootstrap, "old-generation", 2)
    group = f"{topic}-g"
    tp = TopicPartition(topic, 0)
    with consumer(sdk, bootstrap, group) as a, consumer(sdk, bootstrap, group) as b:
        a.subscribe([topic])

        def joined() -> bool:
            a.poll(timeout_ms=100)
            return bool(a.assignment())

        wait_for(joined, "the first member's assignment")
        old = a.group_metadata()
        b.subscribe([topic])

        def both_in_a_newer_generation() -> bool:
            a.poll(timeout_ms=50)
            b.poll(timeout_ms=50)
            ga, gb = a.group_metadata(), b.group_metadata()
            return ga.generation_id == gb.generation_id > old.generation_id and bool(
                a.assignment() and b.assignment()
            )

        wait_for(both_in_a_newer_generation, "both members in a newer generation")
        conn = GatewayConnection([bootstrap], "old-generation-test")
        try:
            api = GatewayGroupApi(conn)
            stale = GroupMember(group, old.member_id, old.generation_id)
            request = CommitRequest(stale, {tp: OffsetAndMetadata(1)})
            assert api.offset_commit(request, 10.0) == {tp: ErrorCode.ILLEGAL_GENERATION}
            current = a.group_metadata()
            fresh = GroupMember(group, current.member_id, current.generation_id)
            assert api.offset_commit(CommitRequest(fresh, {tp: OffsetAndMetadata(1)}), 10.0) == {
                tp: ErrorCode.NONE
            }
        finally:
            conn.close()
