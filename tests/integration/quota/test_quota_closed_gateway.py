"""A gateway that refuses unauthenticated clients (`allow.anonymous=false`): the launcher still
sees it ready (DescribeCluster stays open), anonymous calls are UNAUTHENTICATED, and a stored
user gets through. The first user is stored through the metadata service itself, as Kafka's
first SCRAM users are created against the controller before a SASL-only listener is used."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from riverlog.client import AdminClient
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2, metadata_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_a_closed_gateway_serves_only_stored_users(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path,
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        extra_config={"gateway": {"allow.anonymous": "false"}},
    )
    with cluster:
        closed = cluster.gateway_address
        with AdminClient({"bootstrap.servers": closed}) as admin:
            with pytest.raises(RiverlogError) as info:
                admin.list_topics()
        assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "does not allow unauthenticated clients" in info.value.message
        cluster.describe_cluster()  # open to probes
        with grpc.insecure_channel(cluster.metadata_addresses[0]) as channel:
            stub = metadata_pb2_grpc.MetadataServiceStub(channel)
            stored = stub.UpsertUser(admin_pb2.UpsertUserRequest(name="ops", password="pw"))
            assert stored.error_code == 0
        conf = {"bootstrap.servers": closed, "sasl.username": "ops", "sasl.password": "pw"}
        deadline = time.monotonic() + 10  # the gateway hears of the user within a second
        while True:
            try:
                with AdminClient(conf) as admin:
                    admin.list_topics()
                break
            except RiverlogError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
