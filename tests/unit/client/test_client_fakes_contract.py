"""The fake gateways' half of the contract suite (`gateway_contract.py`): every case against
`AdminGroupGateway` (the FakeGateway with the group RPCs), as the SDK's unit tests use it.
The same cases run against a real gateway in
`tests/integration/client/test_client_fakes_contract_real.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from client_fakes import FakeServer
from gateway_contract import CASES, Target
from group_fakes import AdminGroupGateway

from riverlog.cluster import unique_topic_name


@pytest.fixture
def fake_target() -> Iterator[Target]:
    gateway = AdminGroupGateway()
    server = FakeServer(gateway)
    try:
        yield Target(server.address, unique_topic_name, gateway.group_id)
    finally:
        server.stop()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_fake_gateway_keeps_the_contract(
    case: Callable[[Target], None], fake_target: Target
) -> None:
    case(fake_target)
