"""Fuzzing the cluster's client-facing surfaces (issue 12 item 4): every Gateway RPC with
requests generated from its descriptor, and a storage node's raw zero-copy fetch port. The
oracles: no process dies, no traceback or "unexpected error" is logged, no call hangs (a probe
answers after every round), nothing is written for a refused produce, the zero-copy port
answers or closes as its framing says, and a normal SDK round trip works afterwards.

Bounded for CI: RIVERLOG_FUZZ_EXAMPLES examples per Gateway method (default 50) and
RIVERLOG_FUZZ_ZERO_COPY_CASES raw cases (default 300); raise them for a long run (the timeouts
grow with them), e.g. `RIVERLOG_FUZZ_EXAMPLES=500 pytest tests/integration/fuzz`. A failure
prints the seed; RIVERLOG_FUZZ_SEED reruns it.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path

import pytest
from fuzz_cluster import POOL_TOPICS, LogWatcher, Probe, dead_processes, sdk_round_trip
from fuzz_gateway import make_example, methods
from fuzz_logends import MAYBE_WRITTEN, LogEndReader, growth_outside
from fuzz_runner import FuzzSettings, GatewayFuzzer
from fuzz_values import Pool
from fuzz_zerocopy import (
    cases,
    exchange,
    judge,
    open_fds,
    parse_answers,
    partial_frames,
    requests_in,
)

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.zerocopy import ZeroCopyFetchClient
from riverlog.v1 import common_pb2, data_pb2

EXAMPLES = int(os.environ.get("RIVERLOG_FUZZ_EXAMPLES", "50"))
ZERO_COPY_CASES = int(os.environ.get("RIVERLOG_FUZZ_ZERO_COPY_CASES", "300"))
FD_SETTLE_S = 30.0

pytestmark = pytest.mark.slow


def test_generator_is_deterministic_and_covers_every_method() -> None:
    pool = Pool(topics=["t1", "__consumer_offsets"], groups=["g"], members=["m"])
    for method in methods():
        for index in range(5):
            a = make_example(11, method, index, pool)
            b = make_example(11, method, index, pool)
            assert _wire(a.requests) == _wire(b.requests), method.name
            assert a.metadata == b.metadata
    assert {m.name for m in methods()} >= {"Produce", "FetchStream", "JoinGroup", "ElectLeaders"}


@pytest.mark.timeout(240 + EXAMPLES * 8)
def test_fuzz_gateway(
    fuzz_cluster: LocalCluster, pool: Pool, probe: Probe, seed: int, tmp_path: Path
) -> None:
    started = time.monotonic()
    fuzzer = GatewayFuzzer(
        fuzz_cluster, pool, POOL_TOPICS, probe, FuzzSettings(seed, EXAMPLES), tmp_path
    )
    try:
        stats = fuzzer.run()
    finally:
        fuzzer.close()
    print(f"gateway fuzz (seed {seed}): {stats.summary()}; {time.monotonic() - started:.0f}s")
    assert stats.calls == len(methods()) * EXAMPLES
    assert stats.produce_checked > 0
    sdk_round_trip(fuzz_cluster, unique_topic_name("fuzz-after-gateway"))
    assert not dead_processes(fuzz_cluster)


@pytest.mark.timeout(240 + ZERO_COPY_CASES)
def test_fuzz_zero_copy_port(
    fuzz_cluster: LocalCluster, pool: Pool, probe: Probe, seed: int
) -> None:
    node = fuzz_cluster.storage(probe.leader())
    port = int(node.info["zero_copy_port"])
    assert node.pid is not None
    logs = LogWatcher(fuzz_cluster)
    ends = LogEndReader(fuzz_cluster.storage_addresses)
    fds_before = open_fds(node.pid)
    held = partial_frames(port, 20)  # open halfway through a frame for the whole run
    findings = []
    endings: collections.Counter[str] = collections.Counter()
    try:
        for case in cases(seed, pool, ZERO_COPY_CASES, _parked_fetch(probe)):
            before = ends.read()
            data, end = exchange(port, case)
            endings[end] += 1
            finding = judge(case, data, end)
            if finding is None and end != "open":
                finding = _refused_but_written(case, data, before, ends.settled())
            if finding:
                findings.append(f"{finding}; payload {case.payload[:80]!r} ({len(case.payload)} B)")
        print(f"zero-copy fuzz (seed {seed}): connections {dict(endings)}")
        assert not findings, f"zero-copy findings (seed {seed}):\n" + "\n".join(findings)
        # the connections held open halfway through a frame do not stop a well-formed fetch
        _valid_fetch(port, probe.topic)
    finally:
        for s in held:
            s.close()
        ends.close()
    probe.check()
    assert not dead_processes(fuzz_cluster)
    assert not logs.findings()
    # the node closes every connection of the run once its client is gone (parked long polls
    # included): its descriptor count comes back
    deadline = time.monotonic() + FD_SETTLE_S
    while open_fds(node.pid) > fds_before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_fds(node.pid) <= fds_before + 2, (fds_before, open_fds(node.pid))
    sdk_round_trip(fuzz_cluster, unique_topic_name("fuzz-after-zero-copy"))


def _refused_but_written(case, data: bytes, before, after) -> str | None:
    """The write oracle for produce frames: only partitions answered as (maybe) written grew."""
    requests, _ = requests_in(case.payload)
    if any(getattr(r, "acks", None) == common_pb2.ACKS_NONE for r in requests):
        return None  # acks=0: answered without per-partition results, as in Kafka
    answers, _ = parse_answers(data, requests)
    allowed = {
        (p.topic, p.partition)
        for a in answers
        if isinstance(a, data_pb2.ProduceResponse)
        for p in a.partitions
        if p.error_code in MAYBE_WRITTEN
    }
    unanswered = len(answers) < len(requests)
    grown = growth_outside(allowed, before, after)
    if grown and not unanswered:
        return f"{case.name}: wrote to partitions it refused: {grown}"
    return None


def _parked_fetch(probe: Probe) -> data_pb2.FetchRequest:
    """A fetch of the control topic at its log end that waits as long as the wire allows."""
    offset = probe.log_end()
    return data_pb2.FetchRequest(
        max_wait_ms=2**31 - 1,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(
                topic=probe.topic, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
            )
        ],
    )


def _wire(requests: list) -> list[bytes]:
    return [
        r if isinstance(r, bytes) else r.SerializeToString(deterministic=True) for r in requests
    ]


def _valid_fetch(port: int, topic: str) -> None:
    with ZeroCopyFetchClient("127.0.0.1", port, timeout_s=20) as client:
        answer = client.fetch(
            data_pb2.FetchRequest(
                max_bytes=1 << 20,
                partitions=[
                    data_pb2.FetchPartition(topic=topic, partition=0, partition_max_bytes=1 << 20)
                ],
            )
        )
    [part] = answer.partitions
    assert part.error_code == 0 and part.records, part
