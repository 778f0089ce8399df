"""Issue 10 on real processes: two coordinators sharing `__consumer_offsets` are sent SIGTERM
at the same moment, as `riverlog cluster down` does. Whichever unregisters first has its
partitions handed to the other, which is already stopping; it must decline them and both must
exit cleanly (status 0) well within the launcher's grace period, round after round."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_client import stub_for, wait_until

from riverlog.cluster import LocalCluster
from riverlog.common.cluster.image import group_partition
from riverlog.common.errors import ErrorCode
from riverlog.v1 import coordinator_pb2 as pb

E = ErrorCode
PARTITIONS = 16
ROUNDS = 6
GRACE_S = 30.0
"""Generous: a coordinator stops in well under a second; the hang lasted until SIGKILL."""

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def two_coordinators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        Path(tmp_path_factory.mktemp("shutdown")),
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        coordinators=2,
        extra_config={
            "metadata": {
                "broker.session.timeout.ms": "2000",
                "broker.heartbeat.interval.ms": "300",
                "offsets.topic.num.partitions": str(PARTITIONS),
            },
        },
    ) as local:
        yield local


def _group_per_partition() -> list[str]:
    """One group id landing on each `__consumer_offsets` partition."""
    groups: dict[int, str] = {}
    n = 0
    while len(groups) < PARTITIONS:
        groups.setdefault(group_partition(f"shutdown-{n}", PARTITIONS), f"shutdown-{n}")
        n += 1
    return [groups[p] for p in range(PARTITIONS)]


def _owners_when_all_loaded(gateway: str, groups: list[str]) -> set[int] | None:
    """The coordinator ids owning the partitions, once every partition answers an OffsetFetch
    (owned and loaded); None before."""
    stub = stub_for(gateway)
    found = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=groups), timeout=10)
    if any(c.error_code != E.NONE for c in found.coordinators):
        return None
    for group in groups:
        fetched = stub.OffsetFetch(
            pb.OffsetFetchRequest(group_id=group, all_topics=True), timeout=30
        )
        if fetched.error_code != E.NONE:
            return None
    return {c.node_id for c in found.coordinators}


def test_coordinators_stopped_together_both_exit_promptly(two_coordinators: LocalCluster) -> None:
    gateway = two_coordinators.gateway_address
    groups = _group_per_partition()
    coordinators = two_coordinators.by_role("coordinator")
    for round_ in range(ROUNDS):
        owners = wait_until(
            lambda: _owners_when_all_loaded(gateway, groups) == {1, 2} or None,
            90,
            f"round {round_}: both coordinators owning loaded partitions",
        )
        assert owners
        for proc in coordinators:
            proc.begin_stop()  # SIGTERM to both before waiting for either
        for proc in coordinators:
            exited = proc.wait_exit(GRACE_S)
            assert exited, f"round {round_}: {proc.name} still running:\n{proc.log_tail()}"
            assert proc.returncode == 0, f"round {round_}: {proc.name}:\n{proc.log_tail()}"
        for proc in coordinators:
            proc.restart()
