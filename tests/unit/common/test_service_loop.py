"""Which event loop a service process runs on: uvloop when installed, asyncio's on request."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from riverlog.common.service import EVENT_LOOP_ENV, event_loop_factory


def test_services_run_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    factory = event_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert event_loop_factory() is None
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        assert not isinstance(runner.get_loop(), uvloop.Loop)
