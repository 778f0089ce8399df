"""Calling every method of riverlog.v1.Gateway generically: examples (one request, or a few
for client-streaming methods) generated from the method's input descriptor or mangled at the
wire level, sent through a raw channel with a deadline, and the outcome judged.

A call may answer or fail with a status; the statuses that only a server bug produces
(INTERNAL: an unexpected exception; UNKNOWN; UNIMPLEMENTED for a method the proto declares;
DATA_LOSS; trailers over the client's metadata limit) are findings. Produce-type methods
(`Produce*`) also get the write oracle of `fuzz_logends`. Answers feed the pool: member ids,
producer ids and epochs, generations and the names of topics that got created are named by later
requests.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from fuzz_values import Generator, Pool, wire_mutation
from google.protobuf import descriptor as d
from google.protobuf import message as pb_message
from google.protobuf import message_factory, text_format

from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import gateway_pb2

SERVICE: d.ServiceDescriptor = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]
CLIENT_ID = "riverlog-fuzz"
MAX_STREAM_RESPONSES = 500

BUG_STATUSES = frozenset(
    {
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.DATA_LOSS,
    }
)
# A call ended so that it may or may not have taken effect.
INDETERMINATE_STATUSES = frozenset(
    {
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNAVAILABLE,
    }
)

Request = pb_message.Message | bytes


@dataclass
class Example:
    """One fuzz call: what to send, reproducible from (seed, method, index) and the pool."""

    seed: int
    method: d.MethodDescriptor
    index: int
    requests: list[Request]
    metadata: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return f"{self.method.name}#{self.index}"

    def describe(self, limit: int = 1500) -> str:
        parts = [f"{self.name} (seed {self.seed}) metadata={list(self.metadata)}"]
        for r in self.requests:
            if isinstance(r, bytes):
                text = f"raw bytes {r[:200]!r}{'...' if len(r) > 200 else ''} ({len(r)} bytes)"
            else:
                text = text_format.MessageToString(r, as_one_line=True)
                if len(text) > limit:
                    text = f"{text[:limit]}... ({r.ByteSize()} bytes serialized)"
            parts.append(f"  {type(r).__name__ if not isinstance(r, bytes) else 'bytes'}: {text}")
        return "\n".join(parts)


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    responses: list[pb_message.Message] = field(default_factory=list)


def methods() -> list[d.MethodDescriptor]:
    return list(SERVICE.methods)


def is_produce(method: d.MethodDescriptor) -> bool:
    return method.name.startswith("Produce")


def make_example(seed: int, method: d.MethodDescriptor, index: int, pool: Pool) -> Example:
    rng = random.Random(f"{seed}/{method.name}/{index}")
    count = rng.choice((0, 1, 1, 2, 3)) if method.client_streaming else 1
    requests: list[Request] = []
    for _ in range(count):
        message = Generator(rng, pool).message(method.input_type)
        if rng.random() < 0.12:
            requests.append(wire_mutation(rng, message.SerializeToString()))
        else:
            requests.append(message)
    return Example(seed, method, index, requests, _metadata(rng, pool))


def _printable(rng: random.Random, length: int) -> str:
    return "".join(chr(rng.randrange(0x20, 0x7F)) for _ in range(length))


def _metadata(rng: random.Random, pool: Pool) -> tuple[tuple[str, str], ...]:
    """The client id, and sometimes credentials that are wrong, unknown or malformed."""
    out = [(CLIENT_ID_KEY, CLIENT_ID if rng.random() < 0.9 else _printable(rng, 300))]
    roll = rng.random()
    if roll < 0.04:
        user = rng.choice(pool.users) if pool.users else "nobody"
        out += [("riverlog-user", user), ("riverlog-password", _printable(rng, 12))]
    elif roll < 0.07:
        token = base64.b64encode(_printable(rng, 10).encode()).decode()
        out.append(("authorization", rng.choice((f"Basic {token}", "Basic !!!", "Bearer a.b"))))
    elif roll < 0.09:
        out.append(("riverlog-token", _printable(rng, 40)))
    return tuple(out)


def _serialize(request: Request) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


def invoke(channel: grpc.Channel, example: Example, timeout: float) -> Outcome:
    """Call the example's method; the status and every response received."""
    method = example.method
    path = f"/{SERVICE.full_name}/{method.name}"
    response_type = message_factory.GetMessageClass(method.output_type)
    kind = ("stream" if method.client_streaming else "unary") + (
        "_stream" if method.server_streaming else "_unary"
    )
    call = getattr(channel, kind)(
        path, request_serializer=_serialize, response_deserializer=response_type.FromString
    )
    arg: Any = iter(example.requests) if method.client_streaming else example.requests[0]
    responses: list[pb_message.Message] = []
    try:
        if method.server_streaming:
            stream = call(arg, timeout=timeout, metadata=example.metadata)
            for response in stream:
                responses.append(response)
                if len(responses) >= MAX_STREAM_RESPONSES:
                    stream.cancel()
                    break
        else:
            responses.append(call(arg, timeout=timeout, metadata=example.metadata))
    except grpc.RpcError as exc:
        return Outcome(exc.code(), exc.details() or "", responses)
    return Outcome(grpc.StatusCode.OK, "", responses)


def walk(message: pb_message.Message) -> Iterator[pb_message.Message]:
    """The message and every message nested in it (map values included)."""
    yield message
    for f, value in message.ListFields():
        if f.type != f.TYPE_MESSAGE:
            continue
        if f.message_type.GetOptions().map_entry:
            value_f = f.message_type.fields_by_name["value"]
            if value_f.type == value_f.TYPE_MESSAGE:
                for item in value.values():
                    yield from walk(item)
        elif f.is_repeated:
            for item in value:
                yield from walk(item)
        else:
            yield from walk(value)


def _has(message: pb_message.Message, name: str) -> bool:
    return name in message.DESCRIPTOR.fields_by_name


def harvest(pool: Pool, example: Example, outcome: Outcome) -> None:
    """Remember what the answers name, for later requests to use."""
    for response in outcome.responses:
        for m in walk(response):
            if _has(m, "member_id") and isinstance(m.member_id, str) and m.member_id:
                pool.add(pool.members, m.member_id)
            if _has(m, "producer_id") and _has(m, "producer_epoch") and m.producer_id > 0:
                pool.add(pool.producers, (m.producer_id, m.producer_epoch))
                pool.add(pool.ints, m.producer_id)
            if _has(m, "generation_id") and m.generation_id > 0:
                pool.add(pool.ints, m.generation_id)
            created = _has(m, "topic_id") and _has(m, "name") and _has(m, "error_code")
            if created and m.topic_id and m.error_code == 0 and m.name:
                pool.add(pool.topics, m.name)
    if example.method.name == "UpsertUser" and outcome.code == grpc.StatusCode.OK:
        for r in example.requests:
            if not isinstance(r, bytes) and outcome.responses[0].error_code == 0:
                pool.add(pool.users, r.name)


def server_bug(example: Example, outcome: Outcome) -> str | None:
    """A finding when the status is one only a server bug gives."""
    if outcome.code in BUG_STATUSES:
        return f"{example.name} ended {outcome.code.name}: {outcome.details[:300]}"
    if "metadata size exceeds" in outcome.details:  # the server's trailers were too large
        return f"{example.name} ended {outcome.code.name}: {outcome.details[:300]}"
    return None
