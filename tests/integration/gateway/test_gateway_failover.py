"""The gateway when the cluster moves under it, on a cluster of its own (two storage nodes, two
gateways, short broker sessions, traces written to a file): a produce in flight while its
leader restarts or dies is retried once the pushed metadata shows the new route, several
gateways serve at once, and one produce is one trace from the gateway to the leader."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from gateway_client import GatewayClient, decode, encode, fetch_request, produce_request

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.tracing import TRACE_FILE_ENV
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_MS = 3_000


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("gateway-failover")
    with LocalCluster(
        root,
        storage_nodes=2,
        metadata_nodes=1,
        gateways=2,
        extra_config={
            "metadata": {
                "broker.session.timeout.ms": str(SESSION_MS),
                "broker.heartbeat.interval.ms": "300",
            },
            "gateway": {"max.block.ms": "25000"},
        },
        env={TRACE_FILE_ENV: str(root / "spans.jsonl")},
    ) as local:
        yield local


def leader_of(client: GatewayClient, topic: str, partition: int = 0) -> int:
    response = client.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]))
    return response.topics[0].partitions[partition].leader


def produce_in_background(client: GatewayClient, request: data_pb2.ProduceRequest):
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["response"] = client.Produce(request, timeout=45)
        except Exception as exc:  # reported by the assertion below
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_every_gateway_registers_and_serves(own_cluster: LocalCluster) -> None:
    first, second = (GatewayClient(a) for a in own_cluster.gateway_addresses)
    try:
        topic = unique_topic_name("two-gateways")
        own_cluster.create_topic(topic, partitions=2)
        meta = first.GetMetadata(gateway_pb2.GetMetadataRequest())
        gateways = {n.node_id for n in meta.nodes if n.kind == common_pb2.NODE_KIND_GATEWAY}
        assert gateways == {1, 2}
        assert (
            first.Produce(produce_request(topic, {1: encode([b"via-1"])})).partitions[0].error_code
            == 0
        )
        response = second.Fetch(fetch_request(topic, {1: 0}))
        assert [r.value for r in decode(response.partitions[0].records)] == [b"via-1"]
    finally:
        first.close()
        second.close()


def test_produce_retries_while_its_leader_restarts(own_cluster: LocalCluster) -> None:
    client = GatewayClient(own_cluster.gateway_addresses[0])
    try:
        topic = unique_topic_name("restart")
        own_cluster.create_topic(topic, partitions=1)
        assert (
            client.Produce(produce_request(topic, {0: encode([b"before"])}))
            .partitions[0]
            .error_code
            == 0
        )
        leader = own_cluster.storage(leader_of(client, topic))
        leader.kill()  # SIGKILL: connections refused from now on
        thread, out = produce_in_background(
            client, produce_request(topic, {0: encode([b"during"])})
        )
        time.sleep(0.5)  # let the first attempts fail against the dead leader
        leader.restart(timeout=60)
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert "error" not in out, out.get("error")
        [part] = out["response"].partitions  # type: ignore[attr-defined]
        assert (part.error_code, part.base_offset) == (0, 1), part.error_message
        fetched = client.Fetch(fetch_request(topic, {0: 0}))
        assert [r.value for r in decode(fetched.partitions[0].records)] == [b"before", b"during"]
    finally:
        client.close()


def test_produce_follows_a_leader_that_comes_back_elsewhere(own_cluster: LocalCluster) -> None:
    """The leader dies and comes back at another port: the retry goes to the new address."""
    client = GatewayClient(own_cluster.gateway_addresses[0])
    try:
        topic = unique_topic_name("readdressed")
        own_cluster.create_topic(topic, partitions=1)
        leader = own_cluster.storage(leader_of(client, topic))
        old_address = leader.address
        leader.kill()
        thread, out = produce_in_background(client, produce_request(topic, {0: encode([b"x"])}))
        time.sleep(0.5)
        leader.restart(timeout=60, same_port=False)
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert "error" not in out, out.get("error")
        [part] = out["response"].partitions  # type: ignore[attr-defined]
        assert part.error_code == 0, part.error_message
        assert leader.address != old_address
    finally:
        client.close()


def test_produce_follows_a_moved_leader(own_cluster: LocalCluster) -> None:
    """The leader dies for good: once the controller elects the other replica, the gateway
    sends there."""
    client = GatewayClient(own_cluster.gateway_addresses[1])
    try:
        topic = unique_topic_name("moved")
        own_cluster.create_topic(topic, partitions=1, replication_factor=2)
        old = leader_of(client, topic)
        victim = own_cluster.storage(old)
        victim.kill()
        thread, out = produce_in_background(client, produce_request(topic, {0: encode([b"moved"])}))
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert "error" not in out, out.get("error")
        [part] = out["response"].partitions  # type: ignore[attr-defined]
        new = leader_of(client, topic)
        victim.restart(timeout=60)
        assert part.error_code == 0, part.error_message
        assert new not in (old, -1)
    finally:
        client.close()


def _spans(path: Path) -> list[dict]:
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_one_produce_is_one_trace_from_gateway_to_leader(own_cluster: LocalCluster) -> None:
    client = GatewayClient(own_cluster.gateway_addresses[0])
    try:
        topic = unique_topic_name("traced")
        own_cluster.create_topic(topic, partitions=1)
        client.Produce(produce_request(topic, {0: encode([b"traced"])}))
    finally:
        client.close()
    path = own_cluster.data_dir / "spans.jsonl"
    found = None
    for _ in range(60):  # the span processors export in batches, every few seconds
        spans = _spans(path)
        gateway = [
            s
            for s in spans
            if s.get("name") == "/riverlog.v1.Gateway/Produce"
            and s.get("kind") == "SpanKind.SERVER"
        ]
        storage = [
            s
            for s in spans
            if s.get("name") == "/riverlog.v1.StorageService/Produce"
            and s.get("kind") == "SpanKind.SERVER"
        ]
        traces = {s["context"]["trace_id"] for s in gateway} & {
            s["context"]["trace_id"] for s in storage
        }
        if traces:
            found = (traces, spans)
            break
        time.sleep(0.5)
    assert found is not None, f"no shared trace among {len(_spans(path))} spans"
    traces, spans = found
    trace_id = next(iter(traces))
    in_trace = [s for s in spans if s["context"]["trace_id"] == trace_id]
    by_id = {s["context"]["span_id"]: s for s in in_trace}
    server = next(
        s
        for s in in_trace
        if s["name"] == "/riverlog.v1.StorageService/Produce" and s["kind"] == "SpanKind.SERVER"
    )
    client_span = by_id[server["parent_id"]]
    assert client_span["kind"] == "SpanKind.CLIENT"
    assert client_span["resource"]["attributes"]["service.name"] == "riverlog-gateway"
    assert by_id[client_span["parent_id"]]["name"] == "/riverlog.v1.Gateway/Produce"


def test_gateway_follows_a_restarted_metadata_service(own_cluster: LocalCluster) -> None:
    """The metadata instance restarts: the gateway's watch reconnects (the cache keeps serving
    meanwhile), admin calls reach the new process, and new topics are routed."""
    client = GatewayClient(own_cluster.gateway_addresses[0])
    try:
        before = unique_topic_name("before-metadata-restart")
        own_cluster.create_topic(before, partitions=1)
        own_cluster.metadata(1).restart(timeout=60)
        # routes in the cache still work while (and after) the watch reconnects
        response = client.Produce(produce_request(before, {0: encode([b"still"])}))
        assert response.partitions[0].error_code == 0, response.partitions[0].error_message
        after = unique_topic_name("after-metadata-restart")
        own_cluster.create_topic(after, partitions=2)
        response = client.Produce(produce_request(after, {1: encode([b"new"])}))
        assert response.partitions[0].error_code == 0, response.partitions[0].error_message
    finally:
        client.close()
