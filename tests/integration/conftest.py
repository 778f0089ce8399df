"""Shared fixtures of the integration tests: one real local cluster per test session (etcd,
one metadata instance, three storage nodes and one gateway — real processes on loopback,
started by `riverlog.cluster.LocalCluster` and always stopped by PID at the end), and topics
with names no other test uses. Tests that need another layout or that break processes start
their own LocalCluster, or share one with other modules (shared_clusters.py): `tls_cluster`,
every channel encrypted, and `client_cluster`, which runs a test of the SDK against the session
cluster and against `tls_cluster`. Every test under tests/integration is marked `integration`.
The `spark` fixture is the session's one SparkSession, for the Spark suite and any other test
that runs a Spark query (marked `spark`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sdk_flavours import SYNC, EventLoopThread, Sdk, asyncio_sdk
from shared_clusters import ClientCluster, group_users, shared_cluster, stop_unused

from riverlog.cluster import LocalCluster, unique_topic_name

INTEGRATION_DIR = Path(__file__).resolve().parent
SESSION_STORAGE_NODES = 3
SESSION_METADATA_NODES = 1
SESSION_GATEWAYS = 1

NewTopic = Callable[..., str]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration `integration` (so `-m "not integration"`
    leaves them all out), whether or not its module says so."""
    for item in items:
        if INTEGRATION_DIR in item.path.resolve().parents and not item.get_closest_marker(
            "integration"
        ):
            item.add_marker(pytest.mark.integration)
    group_users(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test's own teardown, stop the shared clusters the next test does not use."""
    try:
        return (yield)
    finally:
        stop_unused(nextitem)


def pytest_sessionfinish(session: pytest.Session) -> None:
    stop_unused(None)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The session's cluster. Do not kill, pause or reconfigure its processes: other tests
    share it (start your own LocalCluster for that)."""
    root = tmp_path_factory.mktemp("cluster")
    with LocalCluster(
        root,
        storage_nodes=SESSION_STORAGE_NODES,
        metadata_nodes=SESSION_METADATA_NODES,
        gateways=SESSION_GATEWAYS,
        # One coordinator, so groups and transactions (the Spark transactional sink) work on
        # the session cluster; few internal partitions keep its start cheap. Members may ask
        # for session timeouts down to 500 ms (groups/test_groups.py's members use 3 s), and a
        # group's first rebalance does not wait 3 s for more members: a test that needs that
        # delay starts a cluster of its own.
        coordinators=1,
        extra_config={
            "metadata": {
                "offsets.topic.num.partitions": "4",
                "transaction.state.log.num.partitions": "4",
            },
            "coordinator": {
                "group.min.session.timeout.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
            },
            # Tiered storage is on for the nodes (topics opt in with remote.storage.enable;
            # nothing changes for the others), with a directory store and short task and
            # retention-check intervals, so a test can read a topic from below its local log
            # start (the Spark source's tiered case) without a cluster of its own.
            "storage": {
                "remote.log.storage.system.enable": "true",
                "rsm.config.dir": str(root / "tier"),
                "remote.log.manager.task.interval.ms": "500",
                "log.retention.check.interval.ms": "1000",
                # The direct port closes a connection without a grant after 5 s, not 10, so
                # storage/test_direct_port_limits.py proves it without a cluster of its own
                # (the SDK asks for its grant before it connects; raw-socket tests that connect
                # first and then ask the gateway still have seconds to spare).
                "direct.grant.timeout.ms": "5000",
            },
        },
    ) as local:
        yield local


@pytest.fixture(scope="session")
def gateway_address(cluster: LocalCluster) -> str:
    """`host:port` of the session cluster's gateway (the SDK's bootstrap.servers)."""
    return cluster.gateway_address


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """ONE SparkSession in local[2,2] for every test that runs Spark (starting one takes 8-20 s
    here): two cores and two attempts per task, so a failed task is retried once as on a
    cluster (plain local[N] never retries; spark/test_spark_txn_sink.py fails a task on
    purpose; the cost: a task failing by accident elsewhere runs twice before its test fails).
    It is set up as measured in shared/notes/pyspark.md (no UI, two shuffle partitions, a
    fast-starting JIT, loopback only, the venv's Python for workers, quiet logs; see
    `riverlog.spark.session`). It does not call `riverlog.spark.register`: PySpark finds the
    `riverlog` format through the installed `pyspark_riverlog` module, which the tests rely on.
    Skips without a Java runtime."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start")
    from riverlog.spark.session import local_session

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = local_session(
        "riverlog-tests", "local[2,2]", work_dir=tmp_path_factory.mktemp("spark-work")
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def sdk_loop() -> Iterator[EventLoopThread]:
    """The event loop (in a thread of its own) of the asyncio flavour's clients."""
    loop = EventLoopThread()
    yield loop
    loop.close()


@pytest.fixture(params=["sync", "asyncio"])
def sdk(request: pytest.FixtureRequest) -> Sdk:
    """The SDK flavour under test (sdk_flavours.py): `sdk.Producer`, `sdk.Consumer`,
    `sdk.AdminClient` are the sync classes, or the asyncio SDK's behind the same method names,
    so a behavioural test of the SDK runs against both. A test that runs one flavour for some
    of its cases parametrizes `sdk` itself (`indirect=["sdk"]`)."""
    if request.param == "sync":
        return SYNC
    return asyncio_sdk(request.getfixturevalue("sdk_loop"))


def _prefix(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:60] or "topic"


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test (or run) uses; the topic is not created."""
    return unique_topic_name(_prefix(request))


def _topic_factory(cluster: LocalCluster, request: pytest.FixtureRequest) -> NewTopic:
    def create(
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
    ) -> str:
        topic = name or unique_topic_name(_prefix(request))
        cluster.create_topic(topic, partitions, replication_factor, configs)
        return topic

    return create


@pytest.fixture
def new_topic(cluster: LocalCluster, request: pytest.FixtureRequest) -> NewTopic:
    """Factory: `new_topic(partitions=1, replication_factor=1, configs=None)` creates a
    uniquely named topic, waits until every partition has a leader, and returns its name."""
    return _topic_factory(cluster, request)


def _tls_cluster(root: Path) -> LocalCluster:
    return LocalCluster(
        root,
        storage_nodes=3,
        metadata_nodes=2,
        gateways=1,
        coordinators=1,
        quota_nodes=1,
        tls=True,
        extra_config={
            "storage": {"replica.fetch.wait.max.ms": "200"},
            "coordinator": {"group.initial.rebalance.delay.ms": "0"},
        },
    )


TLS_CLUSTER = shared_cluster("tls_cluster", _tls_cluster)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
    """A cluster with every channel encrypted (`LocalCluster(tls=True)`, as `riverlog cluster
    up --tls`; decision 0035): two metadata instances, three storage nodes, a coordinator, a
    quota instance and a gateway, each with its own certificate from a throwaway CA; the
    gateway's client listener is TLS too, etcd serves only clients holding a certificate of the
    CA, and every /metrics is HTTPS (decision 0035, addendum). Shared by the modules that use it
    (shared_clusters.py), so the same rules as the session cluster's: do not kill, pause or
    reconfigure its processes, and create only names no other test uses."""
    return TLS_CLUSTER.get(tmp_path_factory)


@pytest.fixture(params=["cluster", "tls_cluster"], ids=["plaintext", "tls"])
def client_cluster(request: pytest.FixtureRequest) -> ClientCluster:
    """The session cluster, then `tls_cluster`: a behavioural test that takes this fixture
    (and builds its clients with `client_cluster.config`) runs over plaintext and over TLS. A
    test that runs TLS for some of its cases only parametrizes `client_cluster` itself
    (`indirect=["client_cluster"]`, values "cluster" and "tls_cluster")."""
    cluster: LocalCluster = request.getfixturevalue(request.param)
    name = "tls" if request.param == "tls_cluster" else "plaintext"
    return ClientCluster(name, cluster, _topic_factory(cluster, request))
