"""`riverlog log-dirs describe` and the sizes of `riverlog topics describe` against the session
cluster (decision 0040): Kafka's kafka-log-dirs.sh document with the produced bytes on every
replica, `--topic-list` / `--broker-list` filters, and a one-line error for an unknown topic."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LINES = [f"record-{i:04d}-" + "x" * 200 for i in range(50)]
PAYLOAD = sum(len(line) for line in LINES)


def log_dirs(riverlog, *args: str) -> dict:
    done = riverlog("log-dirs", "describe", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_log_dirs_describe_and_topic_sizes(riverlog, new_topic, expect_error) -> None:
    topic = new_topic(1, 2)
    done = riverlog("produce", topic, "--acks", "all", input="".join(f"{x}\n" for x in LINES))
    assert done.returncode == 0, done.stderr

    def replicas(document: dict) -> dict[int, dict]:
        return {
            b["broker"]: p
            for b in document["brokers"]
            for d in b["logDirs"]
            for p in d["partitions"]
            if p["partition"] == f"{topic}-0"
        }

    deadline = time.monotonic() + 30
    while True:  # the follower copies after the leader acknowledged
        document = log_dirs(riverlog, "--topic-list", topic)
        found = replicas(document)
        if len(found) == 2 and all(p["size"] >= PAYLOAD for p in found.values()):
            break
        assert time.monotonic() < deadline, document
        time.sleep(0.3)
    assert document["version"] == 1
    assert sorted(b["broker"] for b in document["brokers"]) == [1, 2, 3]
    assert all(b["error"] is None for b in document["brokers"])
    for p in found.values():
        assert (p["offsetLag"], p["isFuture"], p["remoteSize"]) == (0, False, 0)
        assert (p["logStartOffset"], p["localLogStartOffset"], p["logEndOffset"]) == (0, 0, 50)
    one = sorted(found)[0]
    only = log_dirs(riverlog, "--topic-list", topic, "--broker-list", str(one))
    assert [b["broker"] for b in only["brokers"]] == [one]
    assert replicas(only) == {one: found[one]}

    described = riverlog("topics", "describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    [p0] = json.loads(described.stdout)[0]["partitions"]
    assert p0["size_bytes"] == found[p0["leader"]]["size"]
    assert (p0["remote_size_bytes"], p0["log_start_offset"], p0["local_log_start_offset"]) == (
        0,
        0,
        0,
    )
    text = riverlog("topics", "describe", topic)
    assert f"\tSize: {p0['size_bytes']}\tRemoteSize: 0\tLogStart: 0\tLocalLogStart: 0" in (
        text.stdout
    )

    expect_error(
        riverlog("log-dirs", "describe", "--topic-list", f"{topic}-nope"),
        "UNKNOWN_TOPIC_OR_PARTITION",
        f"{topic}-nope",
    )
