"""An in-process fake of the Gateway API for the SDK's unit tests: in-memory partition logs
behind a real gRPC server on 127.0.0.1, with hooks to inject failures.

Only what the SDK needs is served: Produce (offsets assigned by rewriting base offsets, as a
leader does), Fetch (whole stored batches from the one holding fetch_offset), ListOffsets,
GetMetadata and the admin calls. `produce_errors` and `fetch_errors` queue per-call failures;
`seen_client_ids` records the riverlog-client-id of every call.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from riverlog.common.errors import ErrorCode
from riverlog.common.records.header import iter_batches, set_base_offset
from riverlog.common.records.reader import iter_record_timestamps
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.common.types import PRODUCER_BATCH_WINDOW
from riverlog.v1 import (
    admin_pb2,
    common_pb2,
    data_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    transactions_pb2,
)


@dataclass
class FakePartition:
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # base, next, bytes
    log_start: int = 0

    @property
    def end(self) -> int:
        return self.batches[-1][1] if self.batches else self.log_start


@dataclass
class FakeTopic:
    partitions: list[FakePartition]
    configs: dict[str, str] = field(default_factory=dict)
    leaders: list[int] = field(default_factory=list)


class FakeGateway(gateway_pb2_grpc.GatewayServicer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.topics: dict[str, FakeTopic] = {}
        self.produce_errors: deque[ErrorCode | grpc.StatusCode] = deque()
        self.fetch_errors: deque[ErrorCode] = deque()
        # Fetch: a partition whose first batch is larger than its partition_max_bytes gets
        # nothing (as a storage node answers every partition of a request but the first one).
        self.strict_fetch_sizes = False
        self.seen_client_ids: set[str] = set()
        self.produce_requests: list[data_pb2.ProduceRequest] = []
        self.fetch_requests: list[list[tuple[str, int]]] = []  # the partitions of each Fetch
        self.fetch_sizes: list[list[int]] = []  # the partition_max_bytes of each Fetch
        self.drop_responses = 0  # append, then fail the call as UNAVAILABLE (lost response)
        self.partition_errors: dict[tuple[str, int], deque[ErrorCode]] = {}
        self.metadata_calls = 0
        self.metadata_hidden: set[str] = set()  # topics GetMetadata does not know (yet)
        self.next_producer_id = 1000
        self.init_producer_id_calls = 0
        self.txn_ids: dict[str, tuple[int, int]] = {}  # transactional id -> producer id, epoch
        self.txn_events: list[tuple[str, object]] = []
        # Idempotence, as a leader: (topic, partition, producer id) -> epoch and the last W
        # batches' (first seq, last seq, base offset, next offset).
        self.producers: dict[tuple[str, int, int], tuple[int, list[tuple[int, int, int, int]]]] = {}
        # Unknown outcomes, keyed by the first batch's base sequence of a request: append then
        # lose the answer (a gateway that timed out after the leader wrote), then stall the
        # next request of that sequence this long before it reaches the log (a paused leader).
        self.drop_response_at_sequence: set[int] = set()
        self.delay_at_sequence: dict[int, float] = {}
        # The widest span of idempotent batches, from the oldest one not yet answered with
        # success to the newest one seen, in batches: the SDK keeps it at five at most.
        self.max_unresolved_window = 0
        # acks=0: hold the next such Produce (`holding` set) until another Produce arrived and
        # was appended, or at most this long: a leader slow to take a request while the next
        # request, a gRPC call of its own, goes ahead and is appended first.
        self.hold_next_acks_zero_s = 0.0
        self.holding = threading.Event()
        self._produce_arrived = threading.Event()
        self._seen: dict[tuple[str, int, int, int], set[int]] = {}
        self._answered: dict[tuple[str, int, int, int], set[int]] = {}

    def create(self, name: str, partitions: int = 1) -> None:
        with self.lock:
            self.topics[name] = FakeTopic(
                [FakePartition() for _ in range(partitions)], leaders=[0] * partitions
            )

    def records(self, topic: str, partition: int) -> bytes:
        return b"".join(b for _, _, b in self.topics[topic].partitions[partition].batches)

    def _client(self, context: grpc.ServicerContext) -> None:
        for key, value in context.invocation_metadata():
            if key == CLIENT_ID_KEY:
                self.seen_client_ids.add(value)

    # ---- data ------------------------------------------------------------------------

    def Produce(self, request, context):
        self._client(context)
        if request.acks == common_pb2.ACKS_NONE:
            with self.lock:
                hold, self.hold_next_acks_zero_s = self.hold_next_acks_zero_s, 0.0
                if hold:
                    self._produce_arrived.clear()
                    self.holding.set()
            if hold:
                self._produce_arrived.wait(hold)
        first = _first_sequence(request)
        with self.lock:
            delay = 0.0
            if first is not None and first not in self.drop_response_at_sequence:
                delay = self.delay_at_sequence.pop(first, 0.0)  # the attempt after a lost answer
        if delay:
            time.sleep(delay)
        with self.lock:
            self.produce_requests.append(request)
            self._produce_arrived.set()  # a held request appends after this one
            self.txn_events.append(("Produce", request))
            for p in request.partitions:
                self._track_window(p.topic, p.partition, p.records)
            if self.produce_errors:
                err = self.produce_errors.popleft()
                if isinstance(err, grpc.StatusCode):
                    context.abort(err, "injected")
                return data_pb2.ProduceResponse(
                    partitions=[
                        data_pb2.ProducePartitionResponse(
                            topic=p.topic, partition=p.partition, error_code=err
                        )
                        for p in request.partitions
                    ]
                )
            out = []
            for p in request.partitions:
                injected = self.partition_errors.get((p.topic, p.partition))
                if injected:
                    out.append(
                        data_pb2.ProducePartitionResponse(
                            topic=p.topic, partition=p.partition, error_code=injected.popleft()
                        )
                    )
                    continue
                topic = self.topics.get(p.topic)
                if topic is None or p.partition >= len(topic.partitions):
                    out.append(
                        data_pb2.ProducePartitionResponse(
                            topic=p.topic,
                            partition=p.partition,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        )
                    )
                    continue
                part = topic.partitions[p.partition]
                checked = self._check_sequences(p.topic, p.partition, p.records)
                if checked is not None:
                    out.append(checked)
                    continue
                base = part.end
                buf = bytearray(p.records)
                pos = 0
                offset = base
                for header in iter_batches(bytes(buf)):
                    set_base_offset(buf, pos, offset)
                    size = header.size
                    part.batches.append(
                        (offset, offset + header.records_count, bytes(buf[pos : pos + size]))
                    )
                    if header.producer_id >= 0:
                        key = (p.topic, p.partition, header.producer_id)
                        epoch, last = self.producers.get(key, (header.producer_epoch, []))
                        if epoch != header.producer_epoch:
                            last = []
                        last = [
                            *last,
                            (
                                header.base_sequence,
                                header.last_sequence,
                                offset,
                                offset + header.records_count,
                            ),
                        ][-PRODUCER_BATCH_WINDOW:]
                        self.producers[key] = (header.producer_epoch, last)
                    offset += header.records_count
                    pos += size
                out.append(
                    data_pb2.ProducePartitionResponse(
                        topic=p.topic,
                        partition=p.partition,
                        base_offset=base,
                        last_offset=offset - 1,
                        log_append_time_ms=-1,
                    )
                )
            if self.drop_responses:
                self.drop_responses -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "response lost")
            if first is not None and first in self.drop_response_at_sequence:
                self.drop_response_at_sequence.discard(first)
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "response lost")
            for p, answer in zip(request.partitions, out, strict=True):
                if answer.error_code == ErrorCode.NONE:
                    for header in iter_batches(bytes(p.records)):
                        key = (p.topic, p.partition, header.producer_id, header.producer_epoch)
                        self._answered.setdefault(key, set()).add(header.base_sequence)
            return data_pb2.ProduceResponse(partitions=out)

    def _track_window(self, topic: str, partition: int, records: bytes) -> None:
        for header in iter_batches(bytes(records)):
            if header.producer_id < 0:
                continue
            key = (topic, partition, header.producer_id, header.producer_epoch)
            seen = self._seen.setdefault(key, set())
            seen.add(header.base_sequence)
            pending = seen - self._answered.get(key, set())
            oldest = min(pending)
            window = sum(1 for seq in seen if oldest <= seq <= header.base_sequence)
            self.max_unresolved_window = max(self.max_unresolved_window, window)

    def _check_sequences(self, topic, partition, records):
        """A leader's idempotence check of one batch: a duplicate gets its original offsets,
        a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH; None: append."""
        header = iter_batches(bytes(records))[0]
        if header.producer_id < 0:
            return None
        known = self.producers.get((topic, partition, header.producer_id))
        if known is None:
            return None
        epoch, last = known

        def error(code):
            return data_pb2.ProducePartitionResponse(
                topic=topic, partition=partition, error_code=code
            )

        if header.producer_epoch < epoch:
            return error(ErrorCode.INVALID_PRODUCER_EPOCH)
        if header.producer_epoch > epoch:
            return (
                None if header.base_sequence == 0 else error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            )
        for first, last_seq, base, end in last:
            if (first, last_seq) == (header.base_sequence, header.last_sequence):
                return data_pb2.ProducePartitionResponse(
                    topic=topic,
                    partition=partition,
                    base_offset=base,
                    last_offset=end - 1,
                    log_append_time_ms=-1,
                )
        if header.base_sequence != last[-1][1] + 1:
            return error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    def InitProducerId(self, request, context):
        self._client(context)
        if request.transactional_id:
            with self.lock:
                self.txn_events.append(("InitProducerId", request))
                pid, epoch = self.txn_ids.get(request.transactional_id, (self.next_producer_id, -1))
                if request.transactional_id not in self.txn_ids:
                    self.next_producer_id += 1
                self.txn_ids[request.transactional_id] = (pid, epoch + 1)
                return transactions_pb2.InitProducerIdResponse(
                    producer_id=pid, producer_epoch=epoch + 1
                )
        with self.lock:
            self.init_producer_id_calls += 1
            producer_id = self.next_producer_id
            self.next_producer_id += 1
        return transactions_pb2.InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)

    # A transaction coordinator that takes every call (what the SDK sends, in order, is in
    # `txn_events` beside the produce requests); EndTxn bumps the epoch, as KIP-890's.

    def AddPartitionsToTxn(self, request, context):
        self._client(context)
        with self.lock:
            self.txn_events.append(("AddPartitionsToTxn", request))
        return transactions_pb2.AddPartitionsToTxnResponse()

    def AddOffsetsToTxn(self, request, context):
        self._client(context)
        with self.lock:
            self.txn_events.append(("AddOffsetsToTxn", request))
        return transactions_pb2.AddOffsetsToTxnResponse()

    def EndTxn(self, request, context):
        self._client(context)
        with self.lock:
            self.txn_events.append(("EndTxn", request))
            pid, epoch = self.txn_ids[request.transactional_id]
            self.txn_ids[request.transactional_id] = (pid, epoch + 1)
        return transactions_pb2.EndTxnResponse(producer_id=pid, producer_epoch=epoch + 1)

    def Fetch(self, request, context):
        self._client(context)
        out = []
        with self.lock:
            self.fetch_requests.append([(p.topic, p.partition) for p in request.partitions])
            self.fetch_sizes.append([p.partition_max_bytes for p in request.partitions])
            for p in request.partitions:
                resp = data_pb2.FetchPartitionResponse(topic=p.topic, partition=p.partition)
                topic = self.topics.get(p.topic)
                if topic is None or p.partition >= len(topic.partitions):
                    resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    out.append(resp)
                    continue
                if self.fetch_errors:
                    resp.error_code = self.fetch_errors.popleft()
                    out.append(resp)
                    continue
                part = topic.partitions[p.partition]
                resp.high_watermark = part.end
                resp.log_start_offset = part.log_start
                if p.fetch_offset < part.log_start or p.fetch_offset > part.end:
                    resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    out.append(resp)
                    continue
                chunks, size = [], 0
                for _base, nxt, data in part.batches:
                    if nxt <= p.fetch_offset:
                        continue
                    if size + len(data) > p.partition_max_bytes and (
                        chunks or self.strict_fetch_sizes
                    ):
                        break
                    chunks.append(data)
                    size += len(data)
                resp.records = b"".join(chunks)
                out.append(resp)
        return data_pb2.FetchResponse(partitions=out)

    def ListOffsets(self, request, context):
        self._client(context)
        out = []
        with self.lock:
            for p in request.partitions:
                resp = data_pb2.ListOffsetsPartitionResponse(
                    topic=p.topic, partition=p.partition, timestamp_ms=-1, offset=-1
                )
                topic = self.topics.get(p.topic)
                if topic is None or p.partition >= len(topic.partitions):
                    resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.spec == common_pb2.OFFSET_SPEC_EARLIEST:
                    resp.offset = topic.partitions[p.partition].log_start
                elif p.spec == common_pb2.OFFSET_SPEC_LATEST:
                    resp.offset = topic.partitions[p.partition].end
                else:
                    part = topic.partitions[p.partition]
                    for _, _, data in part.batches:
                        for offset, ts in iter_record_timestamps(data):
                            if ts >= p.timestamp_ms and offset >= part.log_start:
                                resp.offset, resp.timestamp_ms = offset, ts
                                break
                        if resp.offset >= 0:
                            break
                out.append(resp)
        return data_pb2.ListOffsetsResponse(partitions=out)

    def DeleteRecords(self, request, context):
        self._client(context)
        out = []
        with self.lock:
            for p in request.partitions:
                part = self.topics[p.topic].partitions[p.partition]
                part.log_start = part.end if p.offset < 0 else p.offset
                out.append(
                    data_pb2.DeleteRecordsPartitionResponse(
                        topic=p.topic, partition=p.partition, low_watermark=part.log_start
                    )
                )
        return data_pb2.DeleteRecordsResponse(partitions=out)

    def GetMetadata(self, request, context):
        self._client(context)
        self.metadata_calls += 1
        with self.lock:
            names = list(request.topics) or list(self.topics)
            resp = gateway_pb2.GetMetadataResponse(cluster_id="fake", controller_id=0)
            for name in names:
                topic = self.topics.get(name)
                if topic is None or name in self.metadata_hidden:
                    resp.errors.add(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                resp.topics.append(self._topic_metadata(name, topic))
            return resp

    def _topic_metadata(self, name: str, topic: FakeTopic) -> common_pb2.TopicMetadata:
        return common_pb2.TopicMetadata(
            name=name,
            topic_id=name,
            partitions=[
                common_pb2.PartitionState(
                    partition=i, leader=topic.leaders[i], replicas=[0], isr=[0]
                )
                for i in range(len(topic.partitions))
            ],
            configs=[common_pb2.ConfigEntry(name=k, value=v) for k, v in topic.configs.items()],
        )

    # ---- admin -----------------------------------------------------------------------

    def CreateTopics(self, request, context):
        self._client(context)
        out = []
        for t in request.topics:
            if t.name in self.topics:
                out.append(
                    admin_pb2.TopicResult(name=t.name, error_code=ErrorCode.TOPIC_ALREADY_EXISTS)
                )
                continue
            if not request.validate_only:
                self.create(t.name, max(t.num_partitions, 1))
                self.topics[t.name].configs.update(t.configs)
            out.append(admin_pb2.TopicResult(name=t.name, topic_id=t.name))
        return admin_pb2.CreateTopicsResponse(topics=out)

    def DeleteTopics(self, request, context):
        self._client(context)
        out = []
        for name in request.names:
            code = (
                ErrorCode.NONE
                if self.topics.pop(name, None)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            out.append(admin_pb2.TopicResult(name=name, error_code=code))
        return admin_pb2.DeleteTopicsResponse(topics=out)

    def ListTopics(self, request, context):
        self._client(context)
        return admin_pb2.ListTopicsResponse(names=sorted(self.topics))

    def DescribeTopics(self, request, context):
        self._client(context)
        out = []
        for name in list(request.names) or sorted(self.topics):
            topic = self.topics.get(name)
            if topic is None:
                out.append(
                    admin_pb2.DescribeTopicsResponse.Topic(
                        name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
            else:
                out.append(
                    admin_pb2.DescribeTopicsResponse.Topic(
                        name=name, metadata=self._topic_metadata(name, topic)
                    )
                )
        return admin_pb2.DescribeTopicsResponse(topics=out)

    def DescribeConfigs(self, request, context):
        self._client(context)
        out = []
        for name in request.topics:
            topic = self.topics.get(name)
            if topic is None:
                out.append(
                    admin_pb2.DescribeConfigsResponse.Topic(
                        name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
                continue
            configs = {"retention.ms": "604800000", **topic.configs}
            out.append(
                admin_pb2.DescribeConfigsResponse.Topic(
                    name=name,
                    configs=[
                        common_pb2.ConfigEntry(name=k, value=v, is_default=k not in topic.configs)
                        for k, v in sorted(configs.items())
                    ],
                )
            )
        return admin_pb2.DescribeConfigsResponse(topics=out)

    def AlterConfigs(self, request, context):
        self._client(context)
        out = []
        for t in request.topics:
            topic = self.topics.get(t.name)
            if topic is None:
                out.append(
                    admin_pb2.TopicResult(
                        name=t.name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
                continue
            for op in t.ops:
                if op.type == admin_pb2.AlterConfigsRequest.Op.DELETE:
                    topic.configs.pop(op.name, None)
                else:
                    topic.configs[op.name] = op.value
            out.append(admin_pb2.TopicResult(name=t.name))
        return admin_pb2.AlterConfigsResponse(topics=out)

    def CreatePartitions(self, request, context):
        self._client(context)
        out = []
        for t in request.topics:
            topic = self.topics[t.name]
            if t.count <= len(topic.partitions):
                out.append(
                    admin_pb2.TopicResult(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS)
                )
                continue
            while len(topic.partitions) < t.count:
                topic.partitions.append(FakePartition())
                topic.leaders.append(0)
            out.append(admin_pb2.TopicResult(name=t.name))
        return admin_pb2.CreatePartitionsResponse(topics=out)

    def DescribeCluster(self, request, context):
        self._client(context)
        return admin_pb2.DescribeClusterResponse(
            cluster_id="fake",
            controller_id=0,
            controller_epoch=1,
            nodes=[
                common_pb2.Node(
                    node_id=0, kind=common_pb2.NODE_KIND_STORAGE, host="127.0.0.1", port=1
                )
            ],
        )


def _first_sequence(request: data_pb2.ProduceRequest) -> int | None:
    """The base sequence of the request's first batch, if it has one."""
    for p in request.partitions:
        for header in iter_batches(bytes(p.records)):
            return header.base_sequence if header.producer_id >= 0 else None
    return None


class StreamingFakeGateway(FakeGateway):
    """A FakeGateway that also serves ProduceStream (the SDK's lane for acks=1/all requests;
    the plain fake answers it UNIMPLEMENTED, so every request there is a unary call): each
    request is handled as Produce, in order, and answered with its correlation id.
    `hold_next_stream_s` holds the next stream request (`holding` set) until a Produce call
    arrived and was appended, or at most this long: a request that overtakes it is appended
    first, as the real gateway's tasks allow."""

    def __init__(self) -> None:
        super().__init__()
        self.hold_next_stream_s = 0.0

    def ProduceStream(self, request_iterator, context):
        for request in request_iterator:
            with self.lock:
                hold, self.hold_next_stream_s = self.hold_next_stream_s, 0.0
                if hold:
                    self._produce_arrived.clear()
                    self.holding.set()
            if hold:
                self._produce_arrived.wait(hold)
            response = self.Produce(request, context)
            response.correlation_id = request.correlation_id
            yield response


class FakeServer:
    """A FakeGateway served on a free 127.0.0.1 port. `stop()` when done."""

    def __init__(self, gateway: FakeGateway | None = None) -> None:
        self.gateway = gateway or FakeGateway()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        gateway_pb2_grpc.add_GatewayServicer_to_server(self.gateway, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None).wait()
