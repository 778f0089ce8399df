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

from riverlog.common.rpc.channel import aio_channel
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
        self._stubs: dict[str, metadata_pb2_grpc.MetadataServiceStub] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, address: str) -> metadata_pb2_grpc.MetadataServiceStub:
        stub = self._stubs.get(address)
        if stub is None:
            channel = aio_channel(address)
            self._channels[address] = channel
            stub = metadata_pb2_grpc.MetadataServiceStub(channel)  # type: ignore[no-untyped-call]
            self._stubs[address] = stub
        return stub

    async def forward(self, address: str, method: str, request: Any) -> Any:
        """Call `method` on the controller at `address`; raises RiverlogError."""
        try:
            return await getattr(self._stub(address), method)(
                request, timeout=self.timeout_s, metadata=((FORWARDED_KEY, "1"),)
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    async def close(self) -> None:
        channels, self._channels, self._stubs = self._channels, {}, {}
        for channel in channels.values():
            with contextlib.suppress(Exception):
                await channel.close()
