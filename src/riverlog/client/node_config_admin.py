"""Dynamic storage-node configs for `AdminClient` (Kafka's Admin describeConfigs and
incrementalAlterConfigs on BROKER resources), over the gateway's AlterConfigs/DescribeConfigs.

A node entity is a storage node id, or None for the cluster-wide default (Kafka's
`ConfigResource(BROKER, "")`, kafka-configs.sh's `--entity-default`); a node's own value wins
over the default. Today the dynamic node configs are the replication throttle rates
(`leader.replication.throttled.rate`, `follower.replication.throttled.rate`, bytes/s).
`NodeConfigAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from riverlog.common.errors import RiverlogError, error_for
from riverlog.v1 import admin_pb2

NodeEntity = int | None
"""A storage node id, or None for the cluster-wide default entity."""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


def _entity_name(node: NodeEntity) -> str:
    return "" if node is None else str(node)


def _entity_of(name: str) -> NodeEntity:
    return None if name == "" else int(name)


def _label(node: NodeEntity) -> str:
    return "<default>" if node is None else str(node)


class NodeConfigAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def describe_node_configs(
        self, nodes: Iterable[NodeEntity] = (), *, all_nodes: bool = False
    ) -> dict[NodeEntity, dict[str, ConfigEntry]]:
        """Every dynamic config of each node entity, defaults included (`is_default`); with
        `all_nodes`, also every entity that has something set."""
        request = admin_pb2.DescribeConfigsRequest(
            nodes=[_entity_name(n) for n in nodes], all_nodes=all_nodes
        )
        response = self._call(lambda s: s.DescribeConfigs, request)
        out: dict[NodeEntity, dict[str, ConfigEntry]] = {}
        for entry in response.nodes:
            if entry.error_code:
                cause = error_for(entry.error_code, entry.error_message)
                raise RiverlogError(f"node {entry.name!r}: {cause.message}", cause.code)
            out[_entity_of(entry.name)] = {
                c.name: ConfigEntry(c.name, c.value, c.is_default) for c in entry.configs
            }
        return out

    def alter_node_configs(
        self,
        changes: Mapping[NodeEntity, Mapping[str, object]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> dict[NodeEntity, RiverlogError | None]:
        """Incremental change (Kafka's IncrementalAlterConfigs on BROKER resources):
        `{node or None: {name: value}}`; a value of None deletes the key. A refused entity
        (INVALID_CONFIG: an unknown name, a negative or non-numeric rate) changes nothing."""
        op = admin_pb2.AlterConfigsRequest.Op
        request = admin_pb2.AlterConfigsRequest(
            nodes=[
                admin_pb2.AlterConfigsRequest.Node(
                    name=_entity_name(node),
                    ops=[
                        op(name=k, type=op.DELETE) if v is None else op(name=k, value=str(v))
                        for k, v in ops.items()
                    ],
                )
                for node, ops in changes.items()
            ],
            validate_only=validate_only,
        )
        response = self._call(lambda s: s.AlterConfigs, request)
        by_name = {_entity_name(n): n for n in changes}
        outcomes: dict[NodeEntity, RiverlogError | None] = {}
        for result in response.nodes:
            node = by_name.get(result.name, None)
            error = None
            if result.error_code:
                cause = error_for(result.error_code, result.error_message)
                error = RiverlogError(f"node {_label(node)}: {cause.message}", cause.code)
            outcomes[node] = error
        if raise_on_error:
            for error in outcomes.values():
                if error is not None:
                    raise error
        return outcomes
