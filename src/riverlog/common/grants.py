"""Grants of direct data access (decision 0047): what a gateway signs and a storage node checks.

A gateway that authenticated a caller, checked its ACLs and charged its byte-rate quota hands
it a grant: the right to send fetch (READ) or produce (WRITE) frames for some topics straight
to one storage node's direct port, for a number of bytes and until a time. The storage node
holds no user database and asks no one: it checks the grant's MAC with the cluster's
direct-access key (`direct.access.secret.key.file`, shared by gateways and storage nodes), its
node id and its expiry against its own wall clock, and counts the bytes on its grant id.

Wire form (big-endian), then an HMAC-SHA256 of everything before it:

    u8 version | 16 bytes grant id | i32 node id | u8 operation | i64 byte budget
    | i64 issued at ms | i64 expires at ms | str principal | str client id
    | u16 topic count | str topic ...              (str: u16 length + UTF-8)

Pure (stdlib `hmac`, `hashlib`, `secrets`): no I/O but `load_key` (which also warns about
a key file readable beyond its owner), no gRPC, no protobuf.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import os
import secrets
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .errors import ErrorCode, RiverlogError

log = logging.getLogger(__name__)

GRANT_VERSION: Final = 1
GRANT_ID_BYTES: Final = 16
MAC_BYTES: Final = 32
MAX_GRANT_BYTES: Final = 16 * 1024
"""Largest encoded grant (MAC included) either side accepts: a gateway refuses to issue a
larger one (INVALID_REQUEST: too many topics; the SDK then uses the gateway for that node), a
node refuses a larger grant frame unread. 16 KiB: 64 topics of the longest names (249
characters), hundreds of usual ones; small, because a node reads a grant frame from a client
that has proven nothing yet (its memory, times max.connections, is what anyone can hold)."""
FRAME_CHARGE_BYTES: Final = 1024
"""What a storage node charges a grant's byte budget for every frame it accepts under it, on top
of the frame's own length (and, for a fetch, the record bytes it sends): so an empty fetch or
produce is not free, and one grant cannot pay for unbounded tight-loop polling (decision 0047).
An SDK counts the same to renew before a frame would be refused."""
MIN_KEY_BYTES: Final = 32
MAX_STR_BYTES: Final = 0xFFFF

_HEAD: Final = struct.Struct(">B16siBqqq")
_U16: Final = struct.Struct(">H")


class GrantOperation(enum.IntEnum):
    """What a grant allows (the proto's DataAccessOperation numbers)."""

    READ = 1
    WRITE = 2


@dataclass(frozen=True, slots=True)
class Grant:
    """One grant, as issued (the signed fields)."""

    grant_id: bytes
    node_id: int
    operation: GrantOperation
    principal: str
    client_id: str
    topics: frozenset[str]
    byte_budget: int
    issued_at_ms: int
    expires_at_ms: int

    def covers(self, topic: str, operation: GrantOperation) -> bool:
        return operation == self.operation and topic in self.topics


def new_grant(
    *,
    node_id: int,
    operation: GrantOperation,
    principal: str,
    client_id: str,
    topics: frozenset[str],
    byte_budget: int,
    now_ms: int,
    lifetime_ms: int,
) -> Grant:
    """A grant with a fresh random id, valid from `now_ms` for `lifetime_ms`."""
    return Grant(
        grant_id=secrets.token_bytes(GRANT_ID_BYTES),
        node_id=node_id,
        operation=operation,
        principal=principal,
        client_id=client_id,
        topics=topics,
        byte_budget=byte_budget,
        issued_at_ms=now_ms,
        expires_at_ms=now_ms + lifetime_ms,
    )


def _malformed(reason: str) -> RiverlogError:
    return RiverlogError(f"invalid grant: {reason}", ErrorCode.SASL_AUTHENTICATION_FAILED)


def _put_str(out: list[bytes], text: str, what: str) -> None:
    data = text.encode("utf-8")
    if len(data) > MAX_STR_BYTES:
        raise RiverlogError(f"grant {what} is too long", ErrorCode.INVALID_REQUEST)
    out += (_U16.pack(len(data)), data)


def sign_grant(grant: Grant, key: bytes) -> bytes:
    """The grant's wire form with its MAC; RiverlogError(INVALID_REQUEST) when it would be
    larger than MAX_GRANT_BYTES."""
    if len(grant.grant_id) != GRANT_ID_BYTES:
        raise ValueError("a grant id is 16 bytes")
    out = [
        _HEAD.pack(
            GRANT_VERSION,
            grant.grant_id,
            grant.node_id,
            int(grant.operation),
            grant.byte_budget,
            grant.issued_at_ms,
            grant.expires_at_ms,
        )
    ]
    _put_str(out, grant.principal, "principal")
    _put_str(out, grant.client_id, "client id")
    topics = sorted(grant.topics)
    if len(topics) > MAX_STR_BYTES:
        raise RiverlogError("a grant names too many topics", ErrorCode.INVALID_REQUEST)
    out.append(_U16.pack(len(topics)))
    for topic in topics:
        _put_str(out, topic, "topic")
    body = b"".join(out)
    if len(body) + MAC_BYTES > MAX_GRANT_BYTES:
        raise RiverlogError(
            f"a grant for {len(topics)} topics is over {MAX_GRANT_BYTES} bytes: ask for fewer",
            ErrorCode.INVALID_REQUEST,
        )
    return body + _mac(key, body)


def _mac(key: bytes, body: bytes | memoryview) -> bytes:
    return hmac.new(key, body, hashlib.sha256).digest()


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> memoryview:
        if size > len(self.data) - self.pos:
            raise _malformed("truncated")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def u16(self) -> int:
        value: int = _U16.unpack(self.take(_U16.size))[0]
        return value

    def text(self) -> str:
        try:
            return str(self.take(self.u16()), "utf-8")
        except UnicodeDecodeError:
            raise _malformed("a string is not UTF-8") from None


def verify_grant(
    data: bytes | bytearray | memoryview, key: bytes, node_id: int, now_ms: int
) -> Grant:
    """The grant `data` encodes, once its MAC, node and time are checked: raises
    RiverlogError(SASL_AUTHENTICATION_FAILED) when it is malformed, not signed with `key` or for
    another node, and RiverlogError(DELEGATION_TOKEN_EXPIRED) when `now_ms` is past its expiry.
    The MAC is checked before any field is read."""
    view = memoryview(data)
    if len(view) > MAX_GRANT_BYTES:
        raise _malformed(f"{len(view)} bytes is over {MAX_GRANT_BYTES}")
    if len(view) < _HEAD.size + MAC_BYTES:
        raise _malformed("too short")
    body, mac = view[:-MAC_BYTES], view[-MAC_BYTES:]
    if not hmac.compare_digest(_mac(key, body), bytes(mac)):
        raise _malformed("not signed by this cluster's direct-access key")
    reader = _Reader(body)
    version, grant_id, grant_node, op, budget, issued, expires = _HEAD.unpack(
        reader.take(_HEAD.size)
    )
    if version != GRANT_VERSION:
        raise _malformed(f"version {version}")
    try:
        operation = GrantOperation(op)
    except ValueError:
        raise _malformed(f"operation {op}") from None
    principal = reader.text()
    client_id = reader.text()
    topics = frozenset(reader.text() for _ in range(reader.u16()))
    if reader.pos != len(body):
        raise _malformed("trailing bytes")
    if grant_node != node_id:
        raise _malformed(f"issued for node {grant_node}, not node {node_id}")
    if now_ms >= expires:
        raise RiverlogError(
            f"the grant expired {now_ms - expires} ms ago", ErrorCode.DELEGATION_TOKEN_EXPIRED
        )
    return Grant(
        grant_id=bytes(grant_id),
        node_id=grant_node,
        operation=operation,
        principal=principal,
        client_id=client_id,
        topics=topics,
        byte_budget=budget,
        issued_at_ms=issued,
        expires_at_ms=expires,
    )


def new_key() -> str:
    """A fresh direct-access key, as a key file holds it (64 hex characters)."""
    return secrets.token_hex(32)


def load_key(path: str | Path) -> bytes:
    """The key in the file at `path` (its text, surrounding whitespace left out);
    RiverlogError(INVALID_CONFIG) when it cannot be read or is shorter than MIN_KEY_BYTES.
    Warns (logging) when the file is readable by others, or by a group other than the
    process's own (Kubernetes mounts a Secret 0440 with the pod's fsGroup, its runAsGroup):
    whoever reads the key can sign grants for any topic."""
    try:
        info = os.stat(path)
        shared = info.st_mode & stat.S_IRWXO or (
            info.st_mode & stat.S_IRWXG and info.st_gid != os.getegid()
        )
        if shared:
            log.warning(
                "the direct-access key file %s has mode %o: readable beyond its owner, and"
                " whoever reads it can sign grants for any topic; make it 0400",
                path,
                stat.S_IMODE(info.st_mode),
            )
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise RiverlogError(
            f"cannot read the direct-access key file {path}: {exc}", ErrorCode.INVALID_CONFIG
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise RiverlogError(
            f"the direct-access key in {path} is {len(key)} bytes; it needs at least"
            f" {MIN_KEY_BYTES} (`riverlog cluster up` writes 64 hex characters)",
            ErrorCode.INVALID_CONFIG,
        )
    return key
