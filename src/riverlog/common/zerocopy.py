"""Client of a storage node's zero-copy fetch channel: a plain TCP socket next to the gRPC port
where the node sends stored record batches with `os.sendfile`, from its segment files straight
to the socket, instead of copying them through a protobuf message.

Wire format (big-endian u32 headers):

    request   [kind << 24 | length][FetchRequest or ProduceRequest protobuf]
    response  [length][FetchResponse protobuf]  then, for each partition in response order,
              exactly `zero_copy_records_size` raw bytes (whole stored batches)
              or [length][ProduceResponse protobuf]

A request header's top byte is its kind (0 fetch, 1 produce) and its low 24 bits its length,
so a fetch frame is exactly what it was before produce existed; a request is at most 16 MiB
(larger produce requests take gRPC). The produce kind lets a gateway send produce requests
over the same cheap connection as fetches (decision 0018): no HTTP/2 framing, no per-call
gRPC machinery, one syscall each way.

The response's partitions carry `zero_copy_records_size` instead of `records`; the clients here
read the raw bytes into one preallocated buffer and hand back a FetchResponse with `records`
filled (and `zero_copy_records_size` cleared), so callers see what the gRPC Fetch returns.
Fetch clients send one request at a time per connection; the connection stays open across
calls. Produce requests are pipelined (`AsyncProduceLane`): the node appends them in arrival
order and answers each, tagged with its correlation id, when it is acknowledged. Used by
gateways, the SDK benchmark and, with replication, follower storage nodes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.frame_reader import FrameReader
from riverlog.common.wire import encode_varint
from riverlog.v1 import data_pb2

FRAME_HEADER: Final = struct.Struct(">I")
KIND_FETCH: Final = 0
KIND_PRODUCE: Final = 1
KIND_GRANT: Final = 2
"""A storage node's direct port only (decision 0047): the payload is a grant from the gateway's
GrantDataAccess; the answer is [length][DataGrantResponse]."""
MAX_REQUEST_FRAME: Final = (1 << 24) - 1
MAX_RESPONSE_HEADER_BYTES: Final = 64 * 1024 * 1024
MAX_RECORDS_BYTES: Final = 1024 * 1024 * 1024
DEFAULT_TIMEOUT_S: Final = 30.0

_T = TypeVar("_T")


def encode_frame(payload: bytes, kind: int = KIND_FETCH) -> bytes:
    """A frame; a request's `kind` goes in the header's top byte (responses use 0)."""
    if len(payload) > MAX_REQUEST_FRAME and kind != KIND_FETCH:
        raise RiverlogError(
            f"a zero-copy request of {len(payload)} bytes is over {MAX_REQUEST_FRAME}",
            ErrorCode.MESSAGE_TOO_LARGE,
        )
    return FRAME_HEADER.pack(kind << 24 | len(payload)) + payload


ProduceFramePart = tuple[str, int, "bytes | memoryview | list[bytes]", "int | None"]
"""(topic, partition, records, current_leader_epoch or None): one ProducePartition. The
records may be a list of batches: the field's bytes are their concatenation, left unjoined
(the SDK's sender, a request of several batches of one partition: no join before the
request's own)."""


def _length_delimited(tag: int, data: bytes | memoryview) -> list[bytes | memoryview]:
    return [bytes((tag,)), encode_varint(len(data)), data]


def produce_request_pieces(
    acks: int,
    timeout_ms: int,
    transactional_id: str,
    correlation_id: int,
    parts: list[ProduceFramePart],
) -> list[bytes | memoryview]:
    """A `data_pb2.ProduceRequest`'s wire form encoded by hand, as pieces whose join is byte
    for byte protobuf's serialization; each partition's records are one of the pieces, as
    given (no copy here). Fields at their default are left out, as protobuf does;
    current_leader_epoch is present whenever given (an optional field). correlation_id comes
    last, so a caller may leave it out (0) and append `correlation_id_field` later."""
    pieces: list[bytes | memoryview] = []
    if acks:
        pieces += (b"\x08", encode_varint(acks))
    if timeout_ms:
        pieces += (b"\x10", encode_varint(timeout_ms))
    for topic, partition, records, leader_epoch in parts:
        body: list[bytes | memoryview] = []
        if topic:
            body += _length_delimited(0x0A, topic.encode())
        if partition:
            body += (b"\x10", encode_varint(partition))
        if isinstance(records, list):
            size = sum(map(len, records))
            if size:
                body += (b"\x1a", encode_varint(size), *records)
        elif records:
            body += _length_delimited(0x1A, records)
        if leader_epoch is not None:
            body += (b"\x20", encode_varint(leader_epoch))
        pieces += (b"\x1a", encode_varint(sum(map(len, body))))
        pieces += body
    if transactional_id:
        pieces += _length_delimited(0x22, transactional_id.encode())
    if correlation_id:
        pieces.append(correlation_id_field(correlation_id))
    return pieces


def correlation_id_field(correlation_id: int) -> bytes:
    """ProduceRequest's correlation_id field (5), encoded; empty at 0."""
    return b"\x28" + encode_varint(correlation_id) if correlation_id else b""


def produce_frame_pieces(
    acks: int,
    timeout_ms: int,
    transactional_id: str,
    correlation_id: int,
    parts: list[ProduceFramePart],
) -> list[bytes | memoryview]:
    """The produce lane's frame of a `data_pb2.ProduceRequest`, its wire form encoded by hand
    (`produce_request_pieces`), as the pieces whose join is the frame: the records as given,
    for a writer that sends them as they are (the lane's `writelines`: no copy before the
    socket), where building the message, serializing it and framing it copied them three times
    (decision 0015's addendum). Raises MESSAGE_TOO_LARGE for a request over
    MAX_REQUEST_FRAME, before anything is sent."""
    pieces = produce_request_pieces(acks, timeout_ms, transactional_id, correlation_id, parts)
    size = sum(map(len, pieces))
    if size > MAX_REQUEST_FRAME:
        raise RiverlogError(
            f"a zero-copy request of {size} bytes is over {MAX_REQUEST_FRAME}",
            ErrorCode.MESSAGE_TOO_LARGE,
        )
    pieces.insert(0, FRAME_HEADER.pack(KIND_PRODUCE << 24 | size))
    return pieces


def split_request_header(value: int) -> tuple[int, int]:
    """(kind, length) of a request header."""
    return value >> 24, value & MAX_REQUEST_FRAME


def records_total(response: data_pb2.FetchResponse) -> int:
    """Raw bytes that follow a response header on the socket; raises on a nonsense header."""
    total = 0
    for p in response.partitions:
        if p.zero_copy_records_size < 0:
            raise RiverlogError("negative zero_copy_records_size", ErrorCode.CORRUPT_MESSAGE)
        total += p.zero_copy_records_size
    if total > MAX_RECORDS_BYTES:
        raise RiverlogError(f"zero-copy response of {total} bytes", ErrorCode.CORRUPT_MESSAGE)
    return total


def fill_records(response: data_pb2.FetchResponse, raw: bytes | bytearray | memoryview) -> None:
    """Move the raw bytes into each partition's `records`, in response order."""
    view = memoryview(raw)
    pos = 0
    for p in response.partitions:
        size = p.zero_copy_records_size
        if size:
            p.records = bytes(view[pos : pos + size])
        pos += size
        p.zero_copy_records_size = 0


def _parse_header(payload: bytes | bytearray) -> data_pb2.FetchResponse:
    response = data_pb2.FetchResponse()
    try:
        response.ParseFromString(bytes(payload))
    except Exception as exc:  # protobuf's DecodeError has no stable import path
        raise RiverlogError(
            f"undecodable fetch response: {exc}", ErrorCode.CORRUPT_MESSAGE
        ) from None
    return response


def _check_header_length(length: int) -> None:
    if length > MAX_RESPONSE_HEADER_BYTES:
        raise RiverlogError(f"response header of {length} bytes", ErrorCode.CORRUPT_MESSAGE)


class ZeroCopyFetchClient:
    """A blocking client over one persistent connection; not thread-safe (one caller at a time).

    Any failure closes the connection (its framing state is unknown) and raises RiverlogError
    (NETWORK_EXCEPTION, REQUEST_TIMED_OUT or CORRUPT_MESSAGE); the next call reconnects.
    """

    def __init__(self, host: str, port: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buffer = bytearray(0)

    def __enter__(self) -> ZeroCopyFetchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            except OSError as exc:
                raise RiverlogError(
                    f"cannot connect to {self.host}:{self.port}: {exc}", ErrorCode.NETWORK_EXCEPTION
                ) from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def fetch(self, request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
        sock = self._connect()
        sock.settimeout(self.timeout_s + max(request.max_wait_ms, 0) / 1000.0)
        try:
            sock.sendall(encode_frame(request.SerializeToString()))
            header = self._recv_exactly(sock, FRAME_HEADER.size)
            (length,) = FRAME_HEADER.unpack(header)
            _check_header_length(length)
            response = _parse_header(self._recv_exactly(sock, length))
            total = records_total(response)
            if len(self._buffer) < total:
                self._buffer = bytearray(total)
            view = memoryview(self._buffer)[:total]
            self._recv_into(sock, view)
            fill_records(response, view)
            return response
        except TimeoutError:
            self.close()
            raise RiverlogError(
                f"no zero-copy answer from {self.host}:{self.port}", ErrorCode.REQUEST_TIMED_OUT
            ) from None
        except OSError as exc:
            self.close()
            raise RiverlogError(
                f"zero-copy channel to {self.host}:{self.port} failed: {exc}",
                ErrorCode.NETWORK_EXCEPTION,
            ) from None
        except RiverlogError:
            self.close()
            raise

    @staticmethod
    def _recv_into(sock: socket.socket, view: memoryview) -> None:
        pos = 0
        while pos < len(view):
            n = sock.recv_into(view[pos:])
            if n == 0:
                raise ConnectionResetError("the storage node closed the connection")
            pos += n

    def _recv_exactly(self, sock: socket.socket, size: int) -> bytearray:
        out = bytearray(size)
        self._recv_into(sock, memoryview(out))
        return out


class AsyncZeroCopyFetchClient:
    """The asyncio variant: one persistent connection; concurrent `fetch` calls queue on a
    lock (no pipelining). Failures close the connection and raise RiverlogError."""

    def __init__(self, host: str, port: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._reader: FrameReader | None = None  # the connection (its transport), when open
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> AsyncZeroCopyFetchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and reader.transport is not None:
            reader.transport.close()

    async def fetch(self, request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
        response, raw = await self.fetch_raw(request)
        fill_records(response, raw)
        return response

    async def fetch_raw(
        self, request: data_pb2.FetchRequest, timeout_s: float | None = None
    ) -> tuple[data_pb2.FetchResponse, bytes | bytearray]:
        """The response as sent (partitions carry `zero_copy_records_size`, not `records`) and
        the raw bytes that followed it, partition after partition, as read (a bytearray, not
        copied into a `bytes`): for callers that slice the records themselves instead of
        copying them into the messages (the gateway, decision 0016's addendum).
        `timeout_s`: the whole exchange's limit (default: the client's plus the long poll)."""
        if timeout_s is None:
            timeout_s = self.timeout_s + max(request.max_wait_ms, 0) / 1000.0
        payload = encode_frame(request.SerializeToString(), KIND_FETCH)
        return await self._call(payload, timeout_s, self._read_fetch)

    async def produce(
        self, request: data_pb2.ProduceRequest, timeout_s: float
    ) -> data_pb2.ProduceResponse:
        """One produce request over the channel (the storage node's Produce, answered with its
        ProduceResponse); RiverlogError(MESSAGE_TOO_LARGE) for a request over 16 MiB."""
        payload = encode_frame(request.SerializeToString(), KIND_PRODUCE)
        return await self._call(payload, timeout_s, self._read_produce)

    async def _call(
        self,
        frame: bytes,
        timeout_s: float,
        read: Callable[[FrameReader], Awaitable[_T]],
    ) -> _T:
        async with self._lock:
            try:
                # asyncio.timeout, not wait_for: 3.11's wait_for returns (or raises) the
                # exchange's own outcome when it ended in the same loop step as a cancel of
                # the caller, and the caller never learns it was cancelled.
                async with asyncio.timeout(timeout_s):
                    reader = await self._send(frame)
                    return await read(reader)
            except TimeoutError:
                await self.close()
                raise RiverlogError(
                    f"no zero-copy answer from {self.host}:{self.port}",
                    ErrorCode.REQUEST_TIMED_OUT,
                ) from None
            except (OSError, asyncio.IncompleteReadError) as exc:
                await self.close()
                raise RiverlogError(
                    f"zero-copy channel to {self.host}:{self.port} failed: {exc}",
                    ErrorCode.NETWORK_EXCEPTION,
                ) from None
            except RiverlogError:
                await self.close()
                raise
            except asyncio.CancelledError:
                # The caller gave up mid-frame: the stream's framing is lost with it.
                await self.close()
                raise

    async def _send(self, frame: bytes) -> FrameReader:
        """Write `frame` (the transport buffers it; a request is at most 16 MiB and one is in
        flight per connection) on the connection, opened first if need be."""
        if self._reader is None:
            loop = asyncio.get_running_loop()
            _, self._reader = await loop.create_connection(FrameReader, self.host, self.port)
        assert self._reader.transport is not None
        self._reader.transport.write(frame)
        return self._reader

    @staticmethod
    async def _read_payload(reader: FrameReader) -> bytearray:
        (length,) = FRAME_HEADER.unpack(await reader.read_exactly(FRAME_HEADER.size))
        _check_header_length(length)
        return await reader.read_exactly(length)

    async def _read_fetch(
        self, reader: FrameReader
    ) -> tuple[data_pb2.FetchResponse, bytes | bytearray]:
        response = _parse_header(await self._read_payload(reader))
        total = records_total(response)
        if not total:
            return response, b""
        raw = bytearray(total)  # read in place; callers slice views of it (`fill_records` copies)
        await reader.read_into(memoryview(raw))
        return response, raw

    async def _read_produce(self, reader: FrameReader) -> data_pb2.ProduceResponse:
        payload = await self._read_payload(reader)
        response = data_pb2.ProduceResponse()
        try:
            response.ParseFromString(bytes(payload))
        except Exception as exc:  # protobuf's DecodeError has no stable import path
            raise RiverlogError(
                f"undecodable produce response: {exc}", ErrorCode.CORRUPT_MESSAGE
            ) from None
        return response


class AsyncProduceLane:
    """One connection to a storage node's zero-copy port that carries produce requests in the
    order they are given, many at a time (decision 0018): each frame is written as `produce` is
    called, the node appends frames in arrival order, and answers come back tagged with the
    request's correlation id, in whatever order their acknowledgements complete. So a producer's
    requests keep their order (as one HTTP/2 connection keeps it for gRPC) without paying a gRPC
    call each.

    A failed connection fails every request waiting on it (NETWORK_EXCEPTION: the requests may
    or may not have been appended; idempotent producers retry safely) and the next call
    reconnects. A request that times out is forgotten; its late answer is dropped."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[data_pb2.ProduceResponse]] = {}
        self._next_id = 1
        self._connecting = asyncio.Lock()
        self._connect_waiters = 0
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        closed = RiverlogError("the produce lane closed", ErrorCode.NETWORK_EXCEPTION)
        await self._disconnect(closed)

    async def produce(
        self, request: data_pb2.ProduceRequest, timeout_s: float
    ) -> data_pb2.ProduceResponse:
        """The node's answer to `request` (its correlation id is set here);
        RiverlogError(MESSAGE_TOO_LARGE) for a request over 16 MiB, before anything is sent."""
        correlation_id = self._next_id
        self._next_id += 1
        request.correlation_id = correlation_id
        frame = encode_frame(request.SerializeToString(), KIND_PRODUCE)
        return await self._exchange(correlation_id, frame, timeout_s)

    async def produce_parts(
        self,
        acks: int,
        timeout_ms: int,
        transactional_id: str,
        parts: list[ProduceFramePart],
        timeout_s: float,
    ) -> data_pb2.ProduceResponse:
        """`produce` of the ProduceRequest these fields make, without building the message
        (`produce_frame_pieces`: the records go to the socket as they are, uncopied)."""
        correlation_id = self._next_id
        self._next_id += 1
        frame = produce_frame_pieces(acks, timeout_ms, transactional_id, correlation_id, parts)
        return await self._exchange(correlation_id, frame, timeout_s)

    async def _exchange(
        self, correlation_id: int, frame: bytes | list[bytes | memoryview], timeout_s: float
    ) -> data_pb2.ProduceResponse:
        async with asyncio.timeout(timeout_s):
            writer = self._writer
            if writer is None or writer.is_closing() or self._connect_waiters:
                writer = await self._connect()
            answer: asyncio.Future[data_pb2.ProduceResponse] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiting[correlation_id] = answer
            try:
                # no await before this: frames go out in call order
                if isinstance(frame, list):
                    writer.writelines(frame)  # the transport holds the pieces, no join
                else:
                    writer.write(frame)
                await writer.drain()
                return await answer
            finally:
                self._waiting.pop(correlation_id, None)

    async def _connect(self) -> asyncio.StreamWriter:
        # FIFO: callers that wait here keep their order, and callers that come while anyone
        # waits queue behind them instead of writing first.
        self._connect_waiters += 1
        try:
            async with self._connecting:
                return await self._connected()
        finally:
            self._connect_waiters -= 1

    async def _connected(self) -> asyncio.StreamWriter:
        if self._closed:
            raise RiverlogError("the produce lane is closed", ErrorCode.NETWORK_EXCEPTION)
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=1024 * 1024)
        except OSError as exc:
            raise RiverlogError(
                f"cannot connect to {self.host}:{self.port}: {exc}",
                ErrorCode.NETWORK_EXCEPTION,
            ) from None
        self._writer = writer
        self._reading = asyncio.create_task(
            self._read_answers(reader, writer), name=f"produce-lane-{self.host}:{self.port}"
        )
        return writer

    async def _read_answers(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        error = RiverlogError(
            f"zero-copy channel to {self.host}:{self.port} closed", ErrorCode.NETWORK_EXCEPTION
        )
        try:
            while True:
                (length,) = FRAME_HEADER.unpack(await reader.readexactly(FRAME_HEADER.size))
                _check_header_length(length)
                response = data_pb2.ProduceResponse()
                response.ParseFromString(await reader.readexactly(length))
                answer = self._waiting.get(response.correlation_id)
                if answer is not None and not answer.done():
                    answer.set_result(response)
        except (OSError, asyncio.IncompleteReadError) as exc:
            error = RiverlogError(
                f"zero-copy channel to {self.host}:{self.port} failed: {exc}",
                ErrorCode.NETWORK_EXCEPTION,
            )
        except RiverlogError as exc:
            error = exc
        except Exception as exc:  # protobuf's DecodeError has no stable import path
            error = RiverlogError(f"undecodable produce answer: {exc}", ErrorCode.CORRUPT_MESSAGE)
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            self._fail_waiting(error)

    def _fail_waiting(self, error: RiverlogError) -> None:
        waiting, self._waiting = self._waiting, {}
        for answer in waiting.values():
            if not answer.done():
                answer.set_exception(RiverlogError(error.message, error.code))

    async def _disconnect(self, error: RiverlogError) -> None:
        writer, self._writer = self._writer, None
        reading, self._reading = self._reading, None
        if writer is not None:
            writer.close()
        if reading is not None:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        self._fail_waiting(error)
