"""Raw-socket fuzzing of a storage node's zero-copy port. Requests are [u32: kind << 24 |
length][protobuf] (kind 0 a FetchRequest of at most `zero.copy.max.request.bytes`, kind 1 a
ProduceRequest of at most 16 MiB, any other kind closes the connection); a fetch is answered
with [u32 length][FetchResponse] and the raw batches it announces, a produce with
[u32 length][ProduceResponse].

Cases, all from one seeded rng: garbage of many sizes; valid frames cut short; lengths of 0,
1, the limits and one past them, unknown kinds (0x80000000 and 0xFFFFFFFF: a negative length
read as u32); valid framing around garbage protobuf; fetch and produce requests generated from
the descriptors (boundary values in every field, broken record batches); several frames
pipelined in one write; a frame sent one byte per write; fetches parked in a long poll. Each
case uses a fresh connection: the client reads the answers due, then half-closes and waits for
the node to close. `requests_in` reads the payload as the node does, so the oracle is exact:
the node answers exactly the frames it can parse, in order and well framed, then closes; a
request that asked for a long wait (a fetch's max_wait_ms, an acks=all produce's timeout) may
be given up by the client, and then the node must drop it and close.
"""

from __future__ import annotations

import random
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from fuzz_values import Generator, Pool
from google.protobuf import message as pb_message

from riverlog.common.zerocopy import FRAME_HEADER, KIND_FETCH, KIND_PRODUCE, MAX_REQUEST_FRAME
from riverlog.v1 import common_pb2, data_pb2

MAX_FETCH_BYTES = 1 << 20  # the node's zero.copy.max.request.bytes default
ANSWER_BOUND_S = 15.0
GIVE_UP_S = 1.0
SHORT_WAIT_MS = 3_000


@dataclass
class Case:
    name: str
    payload: bytes
    bytewise: bool = False  # one send() per byte


def frame(kind: int, body: bytes) -> bytes:
    return FRAME_HEADER.pack(kind << 24 | len(body)) + body


def _fetch(pool: Pool, rng: random.Random, correlation_id: int) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        max_wait_ms=rng.choice((0, 10)),
        min_bytes=rng.choice((0, 1)),
        max_bytes=1 << 20,
        correlation_id=correlation_id,
        partitions=[
            data_pb2.FetchPartition(
                topic=rng.choice(pool.topics), partition=0, partition_max_bytes=1 << 16
            )
        ],
    )


def cases(
    seed: int, pool: Pool, count: int, parked: data_pb2.FetchRequest | None = None
) -> list[Case]:
    """`parked`: a fetch that waits (at the log end, for 2^31-1 ms), sent a few times."""
    rng = random.Random(f"{seed}/zero-copy")
    valid = frame(KIND_FETCH, _fetch(pool, rng, 7).SerializeToString())
    out = [
        Case("empty-fetch", frame(KIND_FETCH, b"")),
        Case("empty-produce", frame(KIND_PRODUCE, b"")),
        Case("nothing", b""),
        Case("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        Case("bytewise", valid, bytewise=True),
        Case("valid-then-garbage", valid + rng.randbytes(9)),
        Case(
            "pipelined",
            b"".join(
                frame(KIND_FETCH, _fetch(pool, rng, i).SerializeToString()) for i in (1, 2, 3)
            ),
        ),
    ]
    for header in (1, MAX_FETCH_BYTES, MAX_FETCH_BYTES + 1, 2**24 - 1, 2**31, 2**32 - 1):
        body = rng.randbytes(min(header & MAX_REQUEST_FRAME, MAX_FETCH_BYTES + 1))
        out.append(Case(f"header-{header:#x}", FRAME_HEADER.pack(header) + body))
    if parked is not None:
        out += [
            Case(f"parked-{i}", frame(KIND_FETCH, parked.SerializeToString())) for i in range(3)
        ]
    for kind in (2, 0x7F):
        out.append(Case(f"kind-{kind}", frame(kind, valid[FRAME_HEADER.size :])))
    for i in range(count):
        kind = rng.choice((KIND_FETCH, KIND_PRODUCE))
        roll = rng.random()
        if roll < 0.15:
            size = rng.choice((1, 3, 4, 5, 64, 4096, 100_000))
            out.append(Case(f"garbage-{i}", rng.randbytes(size)))
        elif roll < 0.3:
            out.append(Case(f"truncated-{i}", valid[: rng.randrange(1, len(valid))]))
        elif roll < 0.45:
            body = rng.randbytes(rng.choice((1, 2, 10, 300)))
            out.append(Case(f"garbage-protobuf-{kind}-{i}", frame(kind, body)))
        else:
            message_type = data_pb2.FetchRequest if kind == KIND_FETCH else data_pb2.ProduceRequest
            request = Generator(rng, pool).message(message_type.DESCRIPTOR)
            body = request.SerializeToString()
            if len(body) <= MAX_REQUEST_FRAME:
                name = "fetch" if kind == KIND_FETCH else "produce"
                out.append(Case(f"{name}-{i}", frame(kind, body)))
    return out


def exchange(port: int, case: Case) -> tuple[bytes, str]:
    """Send the payload, read the answers `requests_in` says are due (giving up after a short
    while on one that may wait long), then half-close and read until the node closes:
    (bytes received, "closed" | "reset" | "open"). A reset (the node closed with our bytes
    unread) may drop answers on their way, so it only bounds their count from above."""
    requests, may_wait = requests_in(case.payload)
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_BOUND_S) as s:
        try:
            if case.bytewise:
                for i in range(len(case.payload)):
                    s.sendall(case.payload[i : i + 1])
            else:
                s.sendall(case.payload)
            while (got := len(parse_answers(bytes(received), requests)[0])) < len(requests):
                last_may_wait = may_wait and got == len(requests) - 1
                s.settimeout(GIVE_UP_S if last_may_wait else ANSWER_BOUND_S)
                try:
                    chunk = s.recv(1 << 16)
                except TimeoutError:
                    if last_may_wait:
                        break  # the client gives up on the long wait it asked for
                    raise
                if not chunk:
                    return bytes(received), "closed"
                received += chunk
            s.settimeout(ANSWER_BOUND_S)
            s.shutdown(socket.SHUT_WR)
            while chunk := s.recv(1 << 16):
                received += chunk
            return bytes(received), "closed"
        except TimeoutError:
            return bytes(received), "open"
        except OSError:  # reset, broken pipe, or not connected any more at the shutdown
            return bytes(received), "reset"


def requests_in(payload: bytes) -> tuple[list[pb_message.Message], bool]:
    """The requests the node parses from `payload`, in order (it answers each, then closes at
    the first frame it cannot take), and whether the last may wait longer than the client."""
    out: list[pb_message.Message] = []
    pos = 0
    while len(payload) - pos >= FRAME_HEADER.size:
        (header,) = FRAME_HEADER.unpack_from(payload, pos)
        kind, length = header >> 24, header & MAX_REQUEST_FRAME
        pos += FRAME_HEADER.size
        if kind not in (KIND_FETCH, KIND_PRODUCE) or (
            kind == KIND_FETCH and length > MAX_FETCH_BYTES
        ):
            break
        if len(payload) - pos < length:
            break
        request: pb_message.Message
        request = data_pb2.FetchRequest() if kind == KIND_FETCH else data_pb2.ProduceRequest()
        try:
            request.ParseFromString(payload[pos : pos + length])
        except Exception:  # DecodeError has no stable import path
            break
        pos += length
        out.append(request)
        if isinstance(request, data_pb2.FetchRequest) and request.max_wait_ms > SHORT_WAIT_MS:
            return out, True
        if isinstance(request, data_pb2.ProduceRequest) and (
            request.acks == common_pb2.ACKS_ALL and request.timeout_ms > SHORT_WAIT_MS
        ):
            return out, True
    return out, False


def parse_answers(
    data: bytes, requests: list[pb_message.Message]
) -> tuple[list[pb_message.Message], str | None]:
    """The whole answers in `data` (a FetchResponse or ProduceResponse per request, in order),
    and what is wrong with their framing (None: nothing)."""
    answers: list[pb_message.Message] = []
    pos = 0
    while pos < len(data):
        if len(answers) == len(requests):
            return answers, f"{len(data) - pos} bytes after the {len(answers)} answers"
        if len(data) - pos < FRAME_HEADER.size:
            return answers, f"{len(data) - pos} stray bytes after {len(answers)} answers"
        (length,) = FRAME_HEADER.unpack_from(data, pos)
        pos += FRAME_HEADER.size
        fetch = isinstance(requests[len(answers)], data_pb2.FetchRequest)
        answer: pb_message.Message
        answer = data_pb2.FetchResponse() if fetch else data_pb2.ProduceResponse()
        try:
            answer.ParseFromString(data[pos : pos + length])
        except Exception as exc:  # DecodeError has no stable import path
            return answers, f"answer {len(answers)} does not parse: {exc}"
        pos += length
        if isinstance(answer, data_pb2.FetchResponse):
            raw = sum(p.zero_copy_records_size for p in answer.partitions)
            if any(p.records for p in answer.partitions) or raw < 0 or pos + raw > len(data):
                follow = len(data) - pos
                return answers, f"answer {len(answers)} announces {raw} raw bytes, {follow} follow"
            pos += raw
        answers.append(answer)
    return answers, None


def judge(case: Case, data: bytes, end: str) -> str | None:
    """What is wrong with how the node treated `case`, or None."""
    requests, may_wait = requests_in(case.payload)
    answers, framing = parse_answers(data, requests)
    if framing is not None and end != "reset":
        return f"{case.name}: badly framed answer: {framing}"
    if end == "open":
        return f"{case.name}: still open {ANSWER_BOUND_S}s after the client's half-close"
    want = len(requests)
    if may_wait and len(answers) == want - 1:
        want -= 1  # the client gave up on a long wait; the node dropped it when we closed
    if len(answers) > want or (end == "closed" and len(answers) != want):
        return f"{case.name}: {len(answers)} answers before the close, expected {want}"
    ids = [a.correlation_id for a in answers]  # type: ignore[attr-defined]
    if case.name == "pipelined" and ids != [1, 2, 3]:
        return f"pipelined answers out of order: {ids}"
    return None


def open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def partial_frames(port: int, count: int) -> list[socket.socket]:
    """Connections left open halfway through a frame (a header, or part of a body)."""
    out = []
    for i in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(struct.pack(">I", 100)[: 1 + i % 4] if i % 2 else struct.pack(">I", 100) + b"x")
        out.append(s)
    return out
