"""Request generation from protobuf descriptors: any message type, walked field by field, with
random and boundary values chosen by the field's type alone, so a new RPC or field is fuzzed
without being listed anywhere.

Per type: integers get 0, ±1, the type's min and max and their neighbours, widths where varints
and fixed encodings change, small counts and ids harvested from earlier answers (producer ids,
generations); floats get NaN, ±inf, ±0, the extremes; enums their values and unknown numbers;
strings empty, very long, unicode, path-like and the names of existing topics, groups, members
and users; bytes get record batches valid and broken (`fuzz_batches`), consumer-protocol blobs
and garbage. Optional fields are sometimes left unset, repeated ones get 0..N items with
duplicates, maps get known and unknown keys, nested messages stop at a depth limit, and a size
budget keeps one request under a few MiB.

Each request also draws a chaos level: the share of its values that are fuzzed, the others
being plausible (small numbers, known enum values, existing names, a valid batch). A request
fuzzed in every field is refused by its first check; one fuzzed in a field or two gets past the
others and reaches the code behind them.

Mid-range numbers (100..10,000) are left out on purpose: in a count field (partitions,
replication) they are valid load, not bad input, and would only make the run slow.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzz_batches import batch_payload, valid_batch
from google.protobuf import descriptor as d
from google.protobuf import message as pb_message
from google.protobuf import message_factory

from riverlog.common.topic_config import TOPIC_CONFIGS

F = d.FieldDescriptor
MAX_DEPTH = 4
REQUEST_BYTES_BUDGET = 3 << 20
REQUEST_ITEMS_BUDGET = 3000

INT32 = (0, 1, -1, 2, -2, 3, 2**31 - 1, -(2**31), 2**31 - 2, -(2**31) + 1, 2**15, 2**16, 2**24)
INT64 = (*INT32, 2**63 - 1, -(2**63), 2**32, 2**53, -(2**53), 1_700_000_000_000, 2**62)
UINT32 = (0, 1, 2, 2**31, 2**32 - 1)
UINT64 = (0, 1, 2, 2**63, 2**64 - 1)
FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), float("-inf"), 1e308, 5e-324)
SMALL = (0, 1, 2, 3, 4, 5)

SPECIAL_STRINGS = (
    ".",
    "..",
    "../../etc/passwd",
    "a/b",
    "a\\b",
    " ",
    "\t\n",
    "\x00",
    "abc\x00def",
    "%s%n%x",
    "${jndi:ldap://x/y}",
    "'; DROP TABLE topics; --",
    "__consumer_offsets",
    "__transaction_state",
    "<default>",
    "é",
    "日本語のトピック",
    "🦀" * 10,
    "\u202eevil",
    "a\u0301",
    "\ufeff",
    "\uffff",
    "\U0001d54f\U0001d550",  # mathematical double-struck X, Y
    "NaN",
    "-1",
    "0",
    "1",
    "14",
    "0.5",
    "1.1",
    "1e309",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "true",
    "yes",
    "compact",
    "delete",
    "compact,delete",
    "compact,compact",
    "LogAppendTime",
    "producer",
    "zstd",
    "brotli",
    "range",
    "roundrobin",
    "cooperative-sticky",
    "consumer",
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "user",
    "client-id",
    "ip",
    "Stable",
    "Empty",
    "Dead",
    *TOPIC_CONFIGS,
)
LONG_LENGTHS = (249, 250, 255, 256, 4096, 1 << 16, 1 << 20)
NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@dataclass
class Pool:
    """What exists in the cluster, for generated requests to name: topics, groups, users,
    member ids, (producer id, epoch) pairs and other ints seen in answers. Grown by the runner
    from responses; read by the generator."""

    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    producers: list[tuple[int, int]] = field(default_factory=list)
    ints: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        return self.topics + self.groups + self.members + self.users

    def add(self, bucket: list[Any], value: Any, limit: int = 50) -> None:
        if value not in bucket:
            bucket.append(value)
            del bucket[:-limit]


class Generator:
    """One request's worth of values: `message(descriptor)`. Deterministic for a given rng
    and pool."""

    def __init__(self, rng: random.Random, pool: Pool) -> None:
        self.rng = rng
        self.pool = pool
        self.chaos = rng.choice((0.05, 0.15, 0.4, 1.0))
        self.bytes_left = REQUEST_BYTES_BUDGET
        self.items_left = REQUEST_ITEMS_BUDGET

    def message(self, descriptor: d.Descriptor, depth: int = 0) -> pb_message.Message:
        msg = message_factory.GetMessageClass(descriptor)()
        for f in descriptor.fields:
            self._fill(msg, f, depth)
        return msg

    def _fill(self, msg: pb_message.Message, f: d.FieldDescriptor, depth: int) -> None:
        rng = self.rng
        if self.items_left <= 0:
            return
        is_message = f.type == F.TYPE_MESSAGE
        if f.is_repeated:
            if is_message and f.message_type.GetOptions().map_entry:
                self._fill_map(msg, f, depth)
                return
            if is_message and depth >= MAX_DEPTH:
                return
            target = getattr(msg, f.name)
            made: list[Any] = []
            for _ in range(self._count(is_message)):
                self.items_left -= 1
                if made and rng.random() < 0.15 * self.chaos:
                    value = rng.choice(made)  # a duplicate
                elif is_message:
                    value = self.message(f.message_type, depth + 1)
                else:
                    value = self.scalar(f)
                made.append(value)
                if is_message:
                    target.add().CopyFrom(value)
                else:
                    target.append(value)
            return
        if is_message:
            if depth < MAX_DEPTH and rng.random() < 0.8:
                getattr(msg, f.name).CopyFrom(self.message(f.message_type, depth + 1))
            return
        if f.has_presence and rng.random() < 0.3 * self.chaos:
            return  # optional field left unset
        self.items_left -= 1
        setattr(msg, f.name, self.scalar(f))

    def _count(self, is_message: bool) -> int:
        if self.rng.random() >= self.chaos:
            return self.rng.choice((1, 1, 2, 3))
        roll = self.rng.random()
        if roll < 0.2:
            return 0
        if roll < 0.55:
            return 1
        if roll < 0.9:
            return self.rng.choice((2, 3))
        return self.rng.choice((16, 17)) if is_message else self.rng.choice((16, 64, 300))

    def _fill_map(self, msg: pb_message.Message, f: d.FieldDescriptor, depth: int) -> None:
        key_f = f.message_type.fields_by_name["key"]
        value_f = f.message_type.fields_by_name["value"]
        target = getattr(msg, f.name)
        for _ in range(self._count(value_f.type == F.TYPE_MESSAGE)):
            self.items_left -= 1
            key = self.scalar(key_f)
            if value_f.type == F.TYPE_MESSAGE:
                if depth < MAX_DEPTH:
                    target[key].CopyFrom(self.message(value_f.message_type, depth + 1))
            else:
                target[key] = self.scalar(value_f)

    def scalar(self, f: d.FieldDescriptor) -> Any:
        if self.rng.random() >= self.chaos:
            return self.plausible(f)
        t = f.type
        if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
            return self._int(INT32, -(2**31), 2**31 - 1)
        if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
            return self._int(INT64, -(2**63), 2**63 - 1)
        if t in (F.TYPE_UINT32, F.TYPE_FIXED32):
            return self._int(UINT32, 0, 2**32 - 1)
        if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
            return self._int(UINT64, 0, 2**64 - 1)
        if t == F.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            return self.rng.choice(FLOATS) if self.rng.random() < 0.8 else self.rng.uniform(-9, 9)
        if t == F.TYPE_ENUM:
            return self._enum(f.enum_type)
        if t == F.TYPE_STRING:
            return self.string()
        if t == F.TYPE_BYTES:
            data = batch_payload(
                self.rng, self.bytes_left, self.pool.topics or ["t"], self.pool.producers
            )
            self.bytes_left -= len(data)
            return data
        raise TypeError(f"no generator for field {f.full_name} of type {t}")

    def plausible(self, f: d.FieldDescriptor) -> Any:
        """A value a well-behaved client might send in this field."""
        rng = self.rng
        t = f.type
        if t == F.TYPE_ENUM:
            return rng.choice([v.number for v in f.enum_type.values])
        if t == F.TYPE_BOOL:
            return rng.random() < 0.5
        if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            return rng.choice((0.0, 1.0, 1000.0))
        if t == F.TYPE_STRING:
            names = self.pool.names()
            roll = rng.random()
            if roll < 0.6 and names:
                return rng.choice(names)
            return "" if roll < 0.8 else rng.choice(SPECIAL_STRINGS)
        if t == F.TYPE_BYTES:
            producer = rng.choice(self.pool.producers) if self.pool.producers else None
            data = valid_batch(rng, producer=producer if rng.random() < 0.3 else None)
            self.bytes_left -= len(data)
            return data
        if self.pool.ints and rng.random() < 0.2:
            value = rng.choice(self.pool.ints)
            if t not in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32) or value < 2**31:
                return value
        return rng.choice(SMALL)

    def _int(self, boundaries: Sequence[int], lo: int, hi: int) -> int:
        rng = self.rng
        roll = rng.random()
        if roll < 0.4:
            return rng.choice(boundaries)
        if roll < 0.7:
            return rng.choice(SMALL)
        if roll < 0.85 and self.pool.ints:
            value = rng.choice(self.pool.ints)
            return value if lo <= value <= hi else rng.choice(SMALL)
        return rng.randint(lo, hi)

    def _enum(self, enum: d.EnumDescriptor) -> int:
        known = [v.number for v in enum.values]
        if self.rng.random() < 0.8:
            return self.rng.choice(known)
        return self.rng.choice((max(known) + 1, -1, 99, 2**31 - 1, -(2**31)))

    def string(self) -> str:
        rng = self.rng
        roll = rng.random()
        names = self.pool.names()
        if roll < 0.35 and names:
            name = rng.choice(names)
            if rng.random() < 0.15:  # near misses of a real name
                name = rng.choice((name.upper(), name + "\x00", name + " ", name[:-1], name * 2))
            return name
        if roll < 0.45:
            return ""
        if roll < 0.65:
            return "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(1, 12)))
        if roll < 0.85:
            return rng.choice(SPECIAL_STRINGS)
        if roll < 0.93 and self.bytes_left > (1 << 20) + 1:
            length = rng.choice(LONG_LENGTHS)
            self.bytes_left -= length
            return rng.choice("ab.-é日") * length
        return "".join(chr(rng.choice(_CODE_POINTS)) for _ in range(rng.randint(1, 40)))


# Code points to draw random unicode from (no surrogates: a proto string must be valid UTF-8).
_CODE_POINTS = (
    *range(0x80),
    *range(0xA0, 0x250),
    *range(0x0590, 0x0700),
    *range(0x3040, 0x3100),
    *range(0xFFF0, 0xFFFE),
    0x10FFFF,
    0x1F600,
    0xE000,
)


def wire_mutation(rng: random.Random, serialized: bytes) -> bytes:
    """Bytes for a request message that a generated message did not produce: garbage, a cut
    serialization, flipped bytes, or unknown fields appended (valid wire format)."""
    roll = rng.random()
    if roll < 0.25:
        return rng.randbytes(rng.choice((1, 3, 16, 1000)))
    if roll < 0.5 and serialized:
        return serialized[: rng.randrange(len(serialized))]
    if roll < 0.75 and serialized:
        out = bytearray(serialized)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    # Field 1000 as a varint, field 1001 as a length-delimited blob: unknown to every message.
    return serialized + b"\xc0\x3e\x7f" + b"\xca\x3e\x03abc"
