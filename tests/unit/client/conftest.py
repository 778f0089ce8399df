"""Fixtures of the SDK's unit tests: in-process fake gateways (see `client_fakes.py`), started
and stopped by each test that uses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from client_fakes import FakeGateway, FakeServer


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    """A fake gateway on a free loopback port."""
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gateway(fake: FakeServer) -> FakeGateway:
    """The fake's in-memory state and failure hooks."""
    return fake.gateway
