"""The replica balancer's throttle rate (decision 0025, addendum): which nodes get
`balancer.replication.throttled.rate` as their `leader/follower.replication.throttled.rate`
while its moves run, and which get it removed when they are done. Pure: the balancer reads the
image's node configs, asks here, and writes `rate_configs` of the answer (the same changes
`partitions reassign --throttle` and `partitions drain --throttle` write).

A rate an operator set is never touched: a node whose own entity, or the cluster-wide default
entity, has a throttled rate the balancer did not set keeps it, is not rated by the balancer
and is not cleared by it. The balancer owns only the nodes it rated; it clears one once no
partition it moves involves that node any more, and forgets it without clearing when the rate
was changed meanwhile (an operator took it over). A new controller adopts the nodes whose
rates are exactly the balancer's (its predecessor may have died between setting and clearing).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from riverlog.common.node_config import DEFAULT_ENTITY, THROTTLED_RATES, NodeConfigs


def _rates(configs: Mapping[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (configs or {}).items() if k in THROTTLED_RATES}


def _is_balancers(configs: Mapping[str, str] | None, rate: int) -> bool:
    """Both rates set, to exactly the balancer's rate."""
    rates = _rates(configs)
    return len(rates) == len(THROTTLED_RATES) and all(v == str(rate) for v in rates.values())


def nodes_to_rate(
    involved: Collection[int], node_configs: NodeConfigs, owned: Collection[int], rate: int
) -> list[int]:
    """The nodes of the balancer's moves to set `rate` on: involved, not rated by it already,
    and with no throttled rate of an operator (on the node or the default entity). None when
    `rate` is 0 (the balancer throttle is off)."""
    if rate <= 0 or _rates(node_configs.get(DEFAULT_ENTITY)):
        return []
    return sorted(
        n for n in set(involved) if n not in owned and not _rates(node_configs.get(str(n)))
    )


def nodes_to_clear(
    owned: Collection[int], involved: Collection[int], node_configs: NodeConfigs, rate: int
) -> tuple[list[int], list[int]]:
    """(nodes to remove the rates from, nodes to forget without touching them): of the nodes
    the balancer rated, those no longer `involved` in a move of its own; a node whose rates are
    no longer the balancer's (an operator changed or removed them) is only forgotten."""
    done = sorted(set(owned) - set(involved))
    clear = [n for n in done if _is_balancers(node_configs.get(str(n)), rate)]
    return clear, [n for n in done if n not in clear]


def adopted_nodes(node_configs: NodeConfigs, rate: int) -> set[int]:
    """The nodes a new controller takes over: both rates set to exactly the balancer's."""
    if rate <= 0:
        return set()
    return {
        int(entity)
        for entity, configs in node_configs.items()
        if entity != DEFAULT_ENTITY and entity.isdigit() and _is_balancers(configs, rate)
    }
