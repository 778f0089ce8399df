"""Fixtures for the zero-copy tests: a storage node's domain objects (from the replica testkit)
with one topic, and a ZeroCopyServer over its FetchHandler on a loopback port."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "replica"))

from storage_replica_testkit import NODE, OTHER, Node, image, make_node, topic

from riverlog.services.storage.rpc.zerocopy import ZeroCopyServer


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = make_node(tmp_path / "logs")
    made.replicas.apply_image(image(topic("t", leaders=[NODE, NODE]), topic("x", leaders=[OTHER])))
    yield made
    made.close()


@pytest.fixture
async def server(node: Node) -> AsyncIterator[ZeroCopyServer]:
    srv = ZeroCopyServer("127.0.0.1", 0, node.fetch, max_request_bytes=4096)
    await srv.start()
    yield srv
    await srv.stop()
