"""Blocking helpers of the idempotence integration tests: the Gateway API's InitProducerId and
Produce with hand-built batches (producer id, epoch and sequence set), so a test can send the
very same bytes twice, as a producer's retry does."""

from __future__ import annotations

import grpc

from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2_grpc, transactions_pb2

METADATA = ((CLIENT_ID_KEY, "idempotence-integration-test"),)
TIMEOUT_S = 30.0


class Client:
    """One gateway's stub (over TLS with `credentials`)."""

    def __init__(self, address: str, credentials: grpc.ChannelCredentials | None = None) -> None:
        self.channel: grpc.Channel = sync_channel(address, credentials)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def init_producer_id(self, **fields: int) -> transactions_pb2.InitProducerIdResponse:
        request = transactions_pb2.InitProducerIdRequest(**fields)
        response: transactions_pb2.InitProducerIdResponse = self.stub.InitProducerId(
            request, timeout=TIMEOUT_S, metadata=METADATA
        )
        return response

    def produce(
        self, topic: str, partition: int, records: bytes
    ) -> data_pb2.ProducePartitionResponse:
        request = data_pb2.ProduceRequest(
            acks=common_pb2.ACKS_ALL,
            timeout_ms=int(TIMEOUT_S * 1000),
            partitions=[
                data_pb2.ProducePartition(topic=topic, partition=partition, records=records)
            ],
        )
        response = self.stub.Produce(request, timeout=TIMEOUT_S, metadata=METADATA)
        answer: data_pb2.ProducePartitionResponse = response.partitions[0]
        return answer

    def end_offset(self, topic: str, partition: int) -> int:
        request = data_pb2.ListOffsetsRequest(
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=topic, partition=partition, spec=common_pb2.OFFSET_SPEC_LATEST
                )
            ]
        )
        response = self.stub.ListOffsets(request, timeout=TIMEOUT_S, metadata=METADATA)
        return int(response.partitions[0].offset)


def batch(producer_id: int, epoch: int, sequence: int, count: int = 3, tag: bytes = b"") -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"%s-%d" % (tag, sequence + i))
    return builder.build()
