"""Principals from tokens and TLS client certificates through a real TLS gateway
(`ssl.client.auth=required`, `allow.anonymous=false`): a client whose certificate says CN=alice
is throttled by alice's user quota, a token authenticates as its user (and wins over the
certificate), a bad token is UNAUTHENTICATED, and plaintext or certificate-less clients fail
cleanly. Certificates are made with openssl in the test's tmp dir; the launcher's readiness
check uses the gateway's CA."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from tls_certs import make_certificates

from riverlog.client import AdminClient
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.credentials import new_token
from riverlog.common.quota.entity import QuotaEntity
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.rpc.channel import CLIENT_ID_KEY, tls_channel_credentials
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _produce_request(topic: str) -> data_pb2.ProduceRequest:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, b"v" * 10_000)
    part = data_pb2.ProducePartition(topic=topic, partition=0, records=builder.build())
    return data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_LEADER, timeout_ms=10_000, partitions=[part]
    )


def _until(action: object, seconds: float = 10.0) -> None:
    """Retry `action` (a callable) until it stops raising RiverlogError: users reach the gateway
    through the quota watch, within a second."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            action()  # type: ignore[operator]
            return
        except RiverlogError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_tls_certificate_names_and_tokens_are_principals(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    alice_cert, alice_key = certs.client("alice")
    bob_cert, bob_key = certs.client("bob")
    cluster = LocalCluster(
        tmp_path / "cluster",
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        extra_config={
            "gateway": {
                "allow.anonymous": "false",
                "ssl.certificate.location": certs.server_cert,
                "ssl.key.location": certs.server_key,
                "ssl.ca.location": certs.ca,
                "ssl.client.auth": "required",
            }
        },
    )
    with cluster:
        address = cluster.gateway_address
        tls = {
            "bootstrap.servers": address,
            "security.protocol": "SSL",
            "ssl.ca.location": certs.ca,
        }
        as_alice = {**tls, "ssl.certificate.location": alice_cert, "ssl.key.location": alice_key}
        as_bob = {**tls, "ssl.certificate.location": bob_cert, "ssl.key.location": bob_key}
        topic = "tls-principals"
        cluster.create_topic(topic, partitions=1)
        token = new_token("svc")
        with AdminClient(as_alice) as admin:  # alice by her certificate: no password needed
            admin.upsert_user("alice", "pw-alice")
            admin.upsert_user("svc", token)
            admin.alter_client_quotas(
                [(QuotaEntity("alice", None), {"producer_byte_rate": 20_000.0})]
            )

        # A token authenticates as its user (over a certificate naming someone else).
        def token_lists_topics() -> None:
            with AdminClient({**as_bob, "sasl.oauthbearer.token": token}) as admin:
                assert topic in admin.list_topics()

        _until(token_lists_topics)
        bad = token[:-2] + ("xx" if not token.endswith("xx") else "yy")
        with AdminClient({**as_bob, "sasl.oauthbearer.token": bad}) as admin:
            with pytest.raises(RiverlogError) as info:
                admin.list_topics()
        assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED

        # The certificate's CN is the quota entity: alice's quota throttles her.
        channel_credentials = tls_channel_credentials(certs.ca, alice_cert, alice_key)
        request = _produce_request(topic)
        with grpc.secure_channel(address, channel_credentials) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)  # type: ignore[no-untyped-call]
            metadata = ((CLIENT_ID_KEY, "tls-test"),)
            throttled = 0
            deadline = time.monotonic() + 15
            while throttled == 0 and time.monotonic() < deadline:
                response = stub.Produce(request, metadata=metadata, timeout=10)
                assert response.partitions[0].error_code == 0
                throttled = response.throttle_time_ms
            assert throttled > 0
            # The same certificate with svc's token: svc has no quota, so no throttle.
            with_token = (*metadata, ("authorization", f"Bearer {token}"))
            assert stub.Produce(request, metadata=with_token, timeout=10).throttle_time_ms == 0

        # Plaintext, or TLS without a client certificate, fails cleanly (no hang, an error).
        plain = {"bootstrap.servers": address, "request.timeout.ms": 3000}
        for conf in (plain, {**tls, "request.timeout.ms": 3000}):
            with AdminClient(conf) as admin:
                with pytest.raises(RiverlogError):
                    admin.list_topics()
