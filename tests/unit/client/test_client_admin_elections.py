"""AdminClient.elect_leaders against a fake gateway: the request it sends (type, partitions,
empty for all) and per-partition outcomes, None when elected."""

from __future__ import annotations

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import AdminClient, TopicPartition
from riverlog.common.errors import ErrorCode
from riverlog.v1 import admin_pb2


class ElectingGateway(FakeGateway):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[admin_pb2.ElectLeadersRequest] = []

    def ElectLeaders(self, request, context):
        self.requests.append(request)
        results = [
            admin_pb2.ElectLeadersResult(
                topic=tp.topic,
                partition=tp.partition,
                error_code=ErrorCode.NONE if tp.partition == 0 else ErrorCode.ELECTION_NOT_NEEDED,
                error_message="" if tp.partition == 0 else "already leads",
                leader=1,
                leader_epoch=3,
            )
            for tp in request.partitions
        ]
        return admin_pb2.ElectLeadersResponse(partitions=results)


def test_elect_leaders_request_and_outcomes() -> None:
    gateway = ElectingGateway()
    server = FakeServer(gateway)
    try:
        with AdminClient({"bootstrap.servers": server.address}) as admin:
            wanted = [TopicPartition("t", 0), TopicPartition("t", 1)]
            outcomes = admin.elect_leaders("preferred", wanted)
            assert outcomes[TopicPartition("t", 0)] is None
            error = outcomes[TopicPartition("t", 1)]
            assert error is not None and error.code == ErrorCode.ELECTION_NOT_NEEDED
            assert admin.elect_leaders("unclean") == {}
            with pytest.raises(ValueError):
                admin.elect_leaders("random")
        first, second = gateway.requests
        assert first.election_type == admin_pb2.ELECTION_TYPE_PREFERRED
        assert [(tp.topic, tp.partition) for tp in first.partitions] == [("t", 0), ("t", 1)]
        assert second.election_type == admin_pb2.ELECTION_TYPE_UNCLEAN
        assert list(second.partitions) == []
    finally:
        server.stop()
