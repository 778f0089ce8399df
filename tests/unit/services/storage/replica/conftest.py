"""Fixtures for the replica-layer tests; the helpers live in storage_replica_testkit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage_replica_testkit import Node, make_node


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = make_node(tmp_path / "logs")
    yield made
    made.close()
