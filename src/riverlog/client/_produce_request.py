"""The producer's ProduceRequest, encoded by hand (decision 0015's addendum, perf-kib).

Building a `data_pb2.ProduceRequest` copied each partition's batch bytes into the message and
serializing it copied them again; the sender keeps its batches as bytes anyway (a retry resends
them), so the request is now kept as the pieces of its wire form (`produce_request_pieces`,
the same encoder as the gateway's lane frame) and joined once, by the stream's serializer,
after the stream has set its correlation id. The join is byte for byte protobuf's
serialization of the same message (a unit test compares them), so the gateway sees no change.
"""

from __future__ import annotations

import operator
from typing import Final

from riverlog.common.zerocopy import ProduceFramePart, correlation_id_field, produce_request_pieces
from riverlog.v1 import data_pb2


class EncodedProduceRequest:
    """A ProduceRequest as the pieces of its wire form; `correlation_id` is set by the stream
    (`StreamCall.submit`) and encoded last, by `SerializeToString`."""

    __slots__ = ("_pieces", "correlation_id")

    def __init__(
        self, acks: int, timeout_ms: int, transactional_id: str, parts: list[ProduceFramePart]
    ) -> None:
        self._pieces = produce_request_pieces(acks, timeout_ms, transactional_id, 0, parts)
        self.correlation_id = 0

    def SerializeToString(self) -> bytes:  # protobuf's name: one serializer takes both
        """The request's bytes: one copy of each batch."""
        pieces = self._pieces
        if self.correlation_id:
            return b"".join([*pieces, correlation_id_field(self.correlation_id)])
        return b"".join(pieces)

    def message(self) -> data_pb2.ProduceRequest:
        """The same request as a protobuf message (for a gateway that takes unary calls only)."""
        return data_pb2.ProduceRequest.FromString(self.SerializeToString())


serialize_request: Final = operator.methodcaller("SerializeToString")
"""The ProduceStream's request serializer: a protobuf message or an EncodedProduceRequest."""
