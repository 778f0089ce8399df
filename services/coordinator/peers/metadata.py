"""The coordinator's one admin call to the metadata service: set configs of a topic (Kafka's
IncrementalAlterConfigs), used to switch `__consumer_offsets` to `cleanup.policy=compact` on
clusters that created it before compaction existed (decision 0008).

Kept apart from the domain code, which does not build protobuf messages: it hands over a name
and `{config: value}` and gets a RiverlogError with the metadata service's code on refusal.
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.cluster import MetadataClient
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.v1 import admin_pb2


class TopicConfigs:
    """Sets topic configs through a `MetadataClient` (which fails over between instances).
    Used from the coordinator's event loop."""

    def __init__(self, client: MetadataClient) -> None:
        self._client = client

    async def set(self, topic: str, configs: Mapping[str, str]) -> None:
        """SET each of `configs` on `topic`, leaving its other configs as they are. Raises
        RiverlogError (UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, NOT_CONTROLLER...)."""
        op = admin_pb2.AlterConfigsRequest.Op
        request = admin_pb2.AlterConfigsRequest(
            topics=[
                admin_pb2.AlterConfigsRequest.Topic(
                    name=topic,
                    ops=[op(name=k, value=v, type=op.SET) for k, v in sorted(configs.items())],
                )
            ]
        )
        response = await self._client.alter_configs(request)
        if not response.topics:
            raise RiverlogError(
                "the metadata service answered with no topic", ErrorCode.UNKNOWN_SERVER_ERROR
            )
        result = response.topics[0]
        code = code_of(result.error_code)
        if code != ErrorCode.NONE:
            raise RiverlogError(result.error_message or None, code)
