"""The quota instance's window handoff: which instances own entities now, a peer that said
it leaves not counted (until a new incarnation of it registers)."""

from __future__ import annotations

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.quota import QuotaResolver
from riverlog.services.quota import QuotaLedger
from riverlog.services.quota.peers.handover import WindowHandoff

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
