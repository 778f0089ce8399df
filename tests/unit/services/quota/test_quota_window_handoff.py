"""The quota instance's window handoff: which instances own entities now, a peer that said
it leaves not counted (until a new incarnation of it registers), and a leaving instance's
windows reaching a peer through the real HandOverWindows RPC on loopback."""

from __future__ import annotations

import asyncio

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.quota import MetricEntity, QuotaResolver, QuotaType, UsageDelta, UsageReport
from riverlog.common.rpc.server import RpcServer
from riverlog.services.quota import QuotaLedger
from riverlog.services.quota.peers.handover import WindowHandoff
from riverlog.services.quota.rpc.servicer import SERVICE_NAME, QuotaServicer, add_to_server

RESOLVER = QuotaResolver.from_paths({})


def test_a_leaving_peer_stops_owning_until_it_registers_again() -> None:
    image = ClusterImage(
        nodes={
            ("quota", 1): NodeInfo("quota", 1, "h", 1, incarnation=1),
            ("quota", 2): NodeInfo("quota", 2, "h", 2, incarnation=4),
        }
    )
    handoff = WindowHandoff(1, QuotaLedger(RESOLVER, ManualClock(0)), lambda: image)
    assert [n.node_id for n in handoff.owners()] == [1, 2]
    handoff.peer_leaving(2, 4)
    assert [n.node_id for n in handoff.owners()] == [1]
    assert [n.node_id for n in handoff.owners(without_self=True)] == []
    # quota 2 restarted (a new incarnation): it owns its share again
    image = ClusterImage(
        nodes={
            ("quota", 1): NodeInfo("quota", 1, "h", 1, incarnation=1),
            ("quota", 2): NodeInfo("quota", 2, "h", 2, incarnation=5),
        }
    )
    assert [n.node_id for n in handoff.owners()] == [1, 2]


def test_a_leaving_instance_hands_every_window_to_a_live_peer_over_grpc() -> None:
    resolver = QuotaResolver.from_paths({"/config/clients/app": {"producer_byte_rate": 1000}})
    app = MetricEntity(None, "app")

    async def scenario() -> tuple[int, float, int, int]:
        clock = ManualClock(0)
        receiver = QuotaLedger(resolver, clock)
        leaving: list[tuple[int, int]] = []
        servicer = QuotaServicer(receiver, clock, lambda n, i: leaving.append((n, i)))
        server = RpcServer("127.0.0.1", 0, [(add_to_server, servicer, SERVICE_NAME)])
        await server.start()
        try:
            image = ClusterImage(
                nodes={
                    ("quota", 1): NodeInfo("quota", 1, "127.0.0.1", 1, incarnation=3),
                    ("quota", 2): NodeInfo("quota", 2, "127.0.0.1", server.port, incarnation=1),
                }
            )
            sender = QuotaLedger(resolver, ManualClock(0))
            report = UsageReport("gw", 1, (UsageDelta(QuotaType.PRODUCE, app, 30_000.0),))
            sender.merge(report, 0)
            handoff = WindowHandoff(1, sender, lambda: image)
            handoff.start(3)
            await handoff.stop()  # the background pass never ran long enough to send
            sent = await handoff.leave()
            await handoff.close()
            assert leaving == [(1, 3)] and sender.keys() == []
            held = receiver.manager(QuotaType.PRODUCE).remaining_throttle_ms(app, 0)
            return sent, receiver.measure(QuotaType.PRODUCE, app, 0), held, handoff.windows_sent
        finally:
            await server.stop(0)

    sent, rate, held, counted = asyncio.run(scenario())
    # 30 000 B over the padded 10 s window: 3000 B/s against 1000 B/s, so Kafka's hold is
    # (3000 - 1000) / 1000 x 10 s, the same on the receiver as on the sender
    assert (sent, counted) == (1, 1) and rate == 3000.0 and held == 20_000
