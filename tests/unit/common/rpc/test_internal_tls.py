"""Internal TLS in the shared rpc library (rpc/tls.py, decision 0035): parsing of the Kafka-named
settings (every refusal names the key and changes nothing), installation, the zero-copy refusal,
and a real loopback server of an internal API under mutual TLS: a channel with a certificate of
the cluster CA gets through and is recorded by its common name; a plaintext channel, one
without a client certificate and one with a certificate from another CA are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest

from riverlog.cluster.certs import ClusterCertificates, issue, new_ca
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc import tls
from riverlog.common.rpc.channel import aio_channel
from riverlog.common.rpc.peer_certificates import DESCRIBE_METHOD
from riverlog.common.rpc.server import RpcServer
from riverlog.v1 import admin_pb2, metadata_pb2_grpc

SSL = {
    tls.PROTOCOL_KEY: "SSL",
    tls.CERTIFICATE_KEY: "/c/me.pem",
    tls.KEY_KEY: "/c/me.key",
    tls.CA_KEY: "/c/ca.pem",
}


def test_plaintext_by_default_and_other_settings_pass_through() -> None:
    parsed, rest = tls.split_overrides({"log.segment.bytes": "10", "ssl.ca.location": "x"})
    assert parsed == tls.PLAINTEXT and not parsed.enabled
    assert rest == {"log.segment.bytes": "10", "ssl.ca.location": "x"}  # the gateway's own


def test_ssl_with_every_file() -> None:
    parsed, rest = tls.split_overrides({**SSL, "request.timeout.ms": "5"})
    assert rest == {"request.timeout.ms": "5"}
    assert parsed == tls.InternalTls("SSL", "/c/me.pem", "/c/me.key", "/c/ca.pem", "required")
    assert tls.split_overrides(parsed.to_overrides()) == (parsed, {})
    lower, _ = tls.split_overrides({**SSL, tls.PROTOCOL_KEY: "ssl"})
    assert lower.enabled


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({tls.PROTOCOL_KEY: "SASL_SSL"}, "security.inter.broker.protocol"),
        ({**SSL, tls.CA_KEY: ""}, "listener.name.internal.ssl.ca.location"),
        ({tls.PROTOCOL_KEY: "SSL"}, "listener.name.internal.ssl.certificate.location"),
        ({**SSL, tls.CLIENT_AUTH_KEY: "none"}, "listener.name.internal.ssl.client.auth"),
        ({tls.CERTIFICATE_KEY: "/c/me.pem"}, "is PLAINTEXT"),
        ({**SSL, "listener.name.internal.ssl.keystore.location": "k"}, "keystore"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides: dict[str, str], names: str) -> None:
    with pytest.raises(RiverlogError) as info:
        tls.split_overrides(overrides)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert names in info.value.message


@pytest.fixture
def certs(tmp_path: Path) -> ClusterCertificates:
    return ClusterCertificates(tmp_path)


@pytest.fixture
def installed(certs: ClusterCertificates) -> Iterator[tls.InternalTls]:
    """Internal TLS installed as server-1's, for the test only."""
    paths = certs.for_process("server-1", ["127.0.0.1"])
    config = tls.InternalTls("SSL", str(paths.certificate), str(paths.key), str(paths.ca))
    tls.install(config)
    try:
        yield config
    finally:
        tls.install(tls.PLAINTEXT)


def test_an_unreadable_file_fails_installation_and_keeps_plaintext(tmp_path: Path) -> None:
    missing = tls.InternalTls("SSL", str(tmp_path / "no.pem"), str(tmp_path / "no.key"), "x")
    with pytest.raises(RiverlogError) as info:
        tls.install(missing)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "listener.name.internal.ssl" in info.value.message
    assert tls.current() == tls.PLAINTEXT and tls.channel_credentials() is None


def test_zero_copy_listener_is_off_under_ssl_and_an_explicit_port_is_refused(
    installed: tls.InternalTls,
) -> None:
    assert tls.zero_copy_listener(0) is False
    with pytest.raises(RiverlogError) as info:
        tls.zero_copy_listener(9094)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "cannot run under security.inter.broker.protocol=SSL" in info.value.message
    tls.install(tls.PLAINTEXT)
    assert tls.zero_copy_listener(9094) is True


class _Servicer(metadata_pb2_grpc.MetadataServiceServicer):
    async def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        return admin_pb2.DescribeClusterResponse(cluster_id="c1")


async def _describe_cluster(channel: grpc.aio.Channel) -> str:
    stub = metadata_pb2_grpc.MetadataServiceStub(channel)
    reply = await stub.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=5)
    return str(reply.cluster_id)


@pytest.mark.timeout(60)
async def test_an_internal_server_requires_a_certificate_of_the_cluster_ca(
    installed: tls.InternalTls, certs: ClusterCertificates, tmp_path: Path
) -> None:
    add = metadata_pb2_grpc.add_MetadataServiceServicer_to_server
    server = RpcServer("127.0.0.1", 0, [(add, _Servicer(), "riverlog.v1.MetadataService")])
    await server.start()
    try:
        # This process's own channel: mutual TLS with server-1's certificate.
        async with aio_channel(server.address) as channel:
            assert await _describe_cluster(channel) == "c1"
            raw = await channel.unary_unary(DESCRIBE_METHOD)(b"", timeout=5)
        seen = json.loads(raw)
        assert seen["transport"] == "ssl"
        assert seen["methods"]["/riverlog.v1.MetadataService/DescribeCluster"] == {"server-1": 1}

        ca = certs.ensure()
        rogue_ca = new_ca("another-ca")
        rogue = issue(rogue_ca, "intruder", ["127.0.0.1"])
        refused = {
            "plaintext": grpc.aio.insecure_channel(server.address),
            "no client certificate": grpc.aio.secure_channel(
                server.address, grpc.ssl_channel_credentials(root_certificates=ca.certificate)
            ),
            "another CA's certificate": grpc.aio.secure_channel(
                server.address,
                grpc.ssl_channel_credentials(
                    root_certificates=ca.certificate,
                    private_key=rogue.key,
                    certificate_chain=rogue.certificate,
                ),
            ),
        }
        for what, channel in refused.items():
            async with channel:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await _describe_cluster(channel)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE, what
        async with aio_channel(server.address) as channel:
            seen = json.loads(await channel.unary_unary(DESCRIBE_METHOD)(b"", timeout=5))
        calls = seen["methods"]["/riverlog.v1.MetadataService/DescribeCluster"]
        assert calls == {"server-1": 1}  # none of the refused ones reached the servicer
    finally:
        await server.stop(0)


def test_a_service_command_line_installs_internal_tls_and_keeps_its_own_settings(
    certs: ClusterCertificates,
) -> None:
    from riverlog.common.node import parse_node_args

    paths = certs.for_process("quota-1", ["127.0.0.1"])
    internal = tls.InternalTls("SSL", str(paths.certificate), str(paths.key), str(paths.ca))
    items = [f"--config={k}={v}" for k, v in internal.to_overrides().items()]
    seen: list[dict[str, str]] = []

    def own_config(overrides: Mapping[str, str]) -> dict[str, str]:
        seen.append(dict(overrides))
        return dict(overrides)

    try:
        options, _ = parse_node_args(
            "quota", own_config, ["--node-id", "1", *items, "--config", "a.b=1"], node_id_help=""
        )
        assert seen == [{"a.b": "1"}] and options.config == {"a.b": "1"}
        assert tls.current() == internal and tls.channel_credentials() is not None
    finally:
        tls.install(tls.PLAINTEXT)
    with pytest.raises(SystemExit) as exit_info:  # a bad setting: a usage error, nothing installed
        parse_node_args(
            "quota",
            own_config,
            ["--node-id", "1", "--config", "security.inter.broker.protocol=TLS"],
            node_id_help="",
        )
    assert exit_info.value.code == 2
    assert tls.current() == tls.PLAINTEXT
