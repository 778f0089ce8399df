"""Forwarding of write RPCs from a standby instance to the active controller, so clients may
send CreateTopics and friends to any metadata instance.

A forwarded call carries the `riverlog-forwarded` header; an instance that receives one while
it is not the controller answers NOT_CONTROLLER instead of forwarding again, so a request
never loops between instances during an election (the client retries).
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import grpc

from riverlog.common.cluster.client import METADATA_RPCS
from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises, pick
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import metadata_pb2_grpc

FORWARDED_KEY: Final = "riverlog-forwarded"


def was_forwarded(metadata: Any) -> bool:
    """Whether invocation metadata marks the call as already forwarded once."""
    return any(key == FORWARDED_KEY for key, _ in metadata or ())


class ControllerPeer:
    """Typed access to the controller's MetadataService. One per process, on its loop; keeps
    one channel per controller address it has seen (at most a handful)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._channels: ChannelCache[metadata_pb2_grpc.MetadataServiceAsyncStub] = ChannelCache(
            metadata_pb2_grpc.MetadataServiceStub, "controller"
        )

    async def forward(self, address: str, method: str, request: Any) -> Any:
        """Call `method` on the controller at `address`; raises RiverlogError (NOT_CONTROLLER,
        so the client retries, when the channel closes under the call: this instance stops)."""
        try:
            rpc = pick(METADATA_RPCS, self._channels.stub_at(address), method)
            with closed_channel_raises(ErrorCode.NOT_CONTROLLER, f"controller at {address}"):
                return await rpc(request, timeout=self.timeout_s, metadata=((FORWARDED_KEY, "1"),))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._channels.close()
