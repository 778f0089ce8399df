"""Clusters shared by the tests of several modules, each started when the first test that uses
it starts and stopped (by PID, as every LocalCluster) right after the last one ends, so an idle
cluster does not sit through the rest of the session. Starting a cluster is what makes the
integration suite long (several seconds per cluster on 2 cores); a cluster of the same shape per
module multiplies that for nothing when the tests leave each other's state alone.

A `SharedCluster` is used by a test that requests its fixture (by name, directly or through a
fixture it depends on) or is parametrized with the fixture's name as a value (the
`client_cluster` fixture of conftest.py: `client_cluster` = "tls_cluster"). The integration
conftest moves every test of a shared cluster next to its first one at collection (their order
among themselves kept), so the cluster starts once, and stops it after the last one. A test
that runs alone (`-k`, one file) starts it for itself. The sharing rules are in
docs/dev-guide.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from riverlog.cluster import LocalCluster

Maker = Callable[[Path], LocalCluster]


class SharedCluster:
    """One shared cluster: `get(tmp_path_factory)` (started on first use), `stop()`."""

    def __init__(self, fixture: str, make: Maker) -> None:
        self.fixture = fixture
        self._make = make
        self._cluster: LocalCluster | None = None

    @property
    def running(self) -> bool:
        return self._cluster is not None

    def get(self, tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
        if self._cluster is None:
            cluster = self._make(tmp_path_factory.mktemp(self.fixture))
            cluster.start()  # stops whatever it started if it fails
            self._cluster = cluster
        return self._cluster

    def stop(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.stop()

    def used_by(self, item: pytest.Item) -> bool:
        if self.fixture in getattr(item, "fixturenames", ()):
            return True
        callspec = getattr(item, "callspec", None)
        return callspec is not None and self.fixture in callspec.params.values()


SHARED: list[SharedCluster] = []


def shared_cluster(fixture: str, make: Maker) -> SharedCluster:
    """Register a shared cluster whose tests request the fixture named `fixture`."""
    shared = SharedCluster(fixture, make)
    SHARED.append(shared)
    return shared


def group_users(items: list[pytest.Item]) -> None:
    """Move the tests of each shared cluster next to the first of them (in place)."""
    for shared in SHARED:
        users = [item for item in items if shared.used_by(item)]
        if len(users) < 2:
            continue
        first = items.index(users[0])
        moved = set(map(id, users))
        rest = [item for item in items if id(item) not in moved]
        items[:] = rest[:first] + users + rest[first:]


def stop_unused(nextitem: pytest.Item | None) -> None:
    """Stop every running shared cluster the next test does not use."""
    for shared in SHARED:
        if shared.running and (nextitem is None or not shared.used_by(nextitem)):
            shared.stop()


@dataclass(frozen=True)
class ClientCluster:
    """A cluster as a client reaches it (the `client_cluster` fixture's value): `config` is the
    SDK's bootstrap.servers with, on a TLS cluster, its TLS settings; `credentials` those of a
    raw gRPC channel to the gateway (None: plaintext); `new_topic` as the fixture of that
    name."""

    name: str
    cluster: LocalCluster
    new_topic: Callable[..., str]

    @property
    def config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.cluster.gateway_address, **self.cluster.client_tls_config}

    @property
    def credentials(self) -> grpc.ChannelCredentials | None:
        if not self.cluster.client_tls_config:
            return None
        ca = self.cluster.certificates.ca_path.read_bytes()
        return grpc.ssl_channel_credentials(root_certificates=ca)

    def __repr__(self) -> str:
        return self.name
