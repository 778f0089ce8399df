"""`riverlog produce` and `riverlog consume` against the session cluster: a keyed round trip
over several partitions, start positions (--from-beginning, --offset, --from-timestamp),
--follow, and exit statuses when a topic is unknown or the input is malformed."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration


def produce(riverlog, topic: str, lines: list[str], *extra: str) -> None:
    done = riverlog("produce", topic, *extra, input="".join(f"{line}\n" for line in lines))
    assert done.returncode == 0, done.stderr
    assert f"produced {len(lines)} records" in done.stderr


def test_keyed_round_trip_over_partitions(riverlog, new_topic) -> None:
    topic = new_topic(partitions=3)
    lines = [f"user-{i % 5}:event-{i}" for i in range(40)]
    produce(riverlog, topic, lines, "--key-separator", ":", "--acks", "1")

    done = riverlog("consume", topic, "--from-beginning", "--print-key", "--key-separator", ":",
                    "--print-partition")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Processed a total of 40 messages" in done.stderr
    seen = [line.split(":") for line in done.stdout.splitlines()]
    assert sorted(f"{key}:{value}" for _, _, key, value in seen) == sorted(lines)
    # One key, one partition; and within a key the order produced.
    partitions_of: dict[str, set[str]] = {}
    for _, partition, key, _ in seen:
        partitions_of.setdefault(key, set()).add(partition)
    assert all(len(p) == 1 for p in partitions_of.values())
    for key in partitions_of:
        values = [value for _, _, k, value in seen if k == key]
        assert values == [line.split(":")[1] for line in lines if line.startswith(key + ":")]
    assert len({p for (p,) in partitions_of.values()}) > 1  # five keys spread over partitions


def test_round_trip_replicated_with_acks_all_and_compression(riverlog, new_topic) -> None:
    topic = new_topic(partitions=2, replication_factor=3)
    lines = [f"value {i} " + "x" * 50 for i in range(25)]
    bounded = ("--producer-property", "request.timeout.ms=10000",
               "--producer-property", "delivery.timeout.ms=30000")  # fmt: skip
    produce(riverlog, topic, lines, "--acks", "all", "--compression", "lz4", *bounded)
    done = riverlog("consume", topic, "--from-beginning")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(lines)


def test_one_partition_from_an_offset_and_max_messages(riverlog, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce(riverlog, topic, [f"p1-{i}" for i in range(6)], "--partition", "1")
    done = riverlog("consume", topic, "--partition", "1", "--offset", "2", "--print-offset")
    assert done.stdout.splitlines() == [f"Offset:{i}\tp1-{i}" for i in range(2, 6)]
    done = riverlog("consume", topic, "--from-beginning", "--max-messages", "3")
    assert done.stdout.splitlines() == ["p1-0", "p1-1", "p1-2"]
    empty = riverlog("consume", topic, "--partition", "0", "--from-beginning")
    assert empty.returncode == 0 and empty.stdout == ""


def test_from_timestamp(riverlog, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce(riverlog, topic, ["old-1", "old-2"])
    boundary_ms = time.time_ns() // 1_000_000 + 1
    while time.time_ns() // 1_000_000 <= boundary_ms:  # the clock moves past the boundary
        time.sleep(0.005)
    produce(riverlog, topic, ["new-1", "new-2", "new-3"])
    done = riverlog("consume", topic, "--from-timestamp", str(boundary_ms), "--print-timestamp")
    assert done.returncode == 0, done.stderr
    values = [line.split("\t")[1] for line in done.stdout.splitlines()]
    assert sorted(values) == ["new-1", "new-2", "new-3"]
    stamps = [
        int(line.split("\t")[0].removeprefix("CreateTime:")) for line in done.stdout.splitlines()
    ]
    assert all(ts >= boundary_ms for ts in stamps)
    later = riverlog("consume", topic, "--from-timestamp", str(boundary_ms + 3_600_000))
    assert later.returncode == 0 and later.stdout == ""


def test_default_start_is_the_end(riverlog, new_topic) -> None:
    topic = new_topic()
    produce(riverlog, topic, ["before"])
    done = riverlog("consume", topic)
    assert done.returncode == 0 and done.stdout == ""


def test_follow_prints_records_produced_later(riverlog, new_topic, cluster, cli_home) -> None:
    from cli_runner import cli_env

    topic = new_topic(partitions=2)
    follower = subprocess.Popen(
        [sys.executable, "-m", "riverlog.cli.main", "consume", topic, "--follow",
         "--max-messages", "4", "--timeout-ms", "60000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(cli_home, cluster.gateway_address),
    )  # fmt: skip
    try:
        time.sleep(1.0)  # let it reach the end before the records exist (not asserted)
        produce(riverlog, topic, ["f-1", "f-2", "f-3", "f-4", "f-5"])
        out, err = follower.communicate(timeout=90)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert len(out.decode().splitlines()) == 4
    assert set(out.decode().splitlines()) <= {"f-1", "f-2", "f-3", "f-4", "f-5"}


def test_unknown_topic_fails_fast(riverlog, topic_name: str, expect_error) -> None:
    expect_error(riverlog("produce", topic_name, input="x\n"), "UNKNOWN_TOPIC_OR_PARTITION")
    expect_error(riverlog("consume", topic_name), "UNKNOWN_TOPIC_OR_PARTITION")


def test_bad_input_and_bad_partition(riverlog, new_topic, expect_error) -> None:
    topic = new_topic(partitions=2)
    done = riverlog("produce", topic, "--key-separator", ":", input="k:v\nno-separator\n")
    expect_error(done, "line 2 has no key separator")
    expect_error(riverlog("produce", topic, "--partition", "5", input="x\n"), "partition 5")
    expect_error(riverlog("consume", topic, "--partition", "7"), "partition 7")
    expect_error(
        riverlog("produce", topic, "--producer-property", "linger.ms=soon", input="x\n"),
        "linger.ms",
    )


def test_produced_records_are_visible_to_topics_describe(riverlog, new_topic) -> None:
    topic = new_topic(partitions=1)
    produce(riverlog, topic, ["a", "b"])
    assert json.loads(riverlog("topics", "describe", topic, "--json").stdout)[0]["name"] == topic
