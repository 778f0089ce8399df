"""Stored user credentials: a salted PBKDF2-SHA256 hash, never the password, and the check.

The metadata service hashes a password once when an operator adds a user and stores only the
salt, the iteration count and the derived key in etcd; gateways receive those (through the
quota watch) and check the username and password a call carries against them. Kafka's SCRAM
stores the same three things; here the client sends the password itself over the channel (TLS,
when on, protects it), so the check is a recomputation. PBKDF2 is deliberately slow, and a gRPC
call carries its credentials on every request (Kafka authenticates a connection once), so
`CredentialChecker` remembers which (user, password digest) pairs it has verified against which
stored credential: a repeated call costs one SHA-256, and a changed or deleted user invalidates
its entries at once. A user may hold a password and any number of tokens: a token
(`<user>.<secret>`) is stored as its own credential under a slot `<user>#<digest id>` beside the
password, and a call carrying a token is checked against the user's password and that token's
slot. Pure: no grpc, no I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

from .entity import ANONYMOUS, DEFAULT

MECHANISM: Final = "pbkdf2-sha256"
DEFAULT_ITERATIONS: Final = 4096
"""Kafka's SCRAM default (and minimum) iteration count."""
SALT_BYTES: Final = 16
MIN_PASSWORD_LENGTH: Final = 1
_NAME: Final = re.compile(r"^[A-Za-z0-9._@+=-]{1,255}$")
_CACHE_MAX: Final = 10_000


@dataclass(frozen=True, slots=True)
class StoredCredential:
    """What is kept for one user (Kafka's ScramCredential without the server key)."""

    name: str
    mechanism: str
    iterations: int
    salt: bytes
    hash: bytes

    def matches(self, password: str) -> bool:
        if self.mechanism != MECHANISM:
            return False
        derived = _derive(password, self.salt, self.iterations)
        return hmac.compare_digest(derived, self.hash)


def _derive(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def validate_user_name(name: str) -> None:
    """RiverlogError(INVALID_REQUEST) unless `name` can name a stored user."""
    if name in (DEFAULT, ANONYMOUS):
        raise RiverlogError(
            f"{name!r} is reserved and cannot be a stored user", ErrorCode.INVALID_REQUEST
        )
    if not _NAME.match(name):
        raise RiverlogError(
            f"invalid user name {name!r}: 1-255 characters of letters, digits and ._@+=-",
            ErrorCode.INVALID_REQUEST,
        )


def hash_password(
    name: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> StoredCredential:
    """A new credential for `name` with a fresh random salt; RiverlogError for a bad name or
    an empty password."""
    validate_user_name(name)
    if len(password) < MIN_PASSWORD_LENGTH:
        raise RiverlogError(f"the password of user {name!r} is empty", ErrorCode.INVALID_REQUEST)
    salt = salt if salt is not None else os.urandom(SALT_BYTES)
    return StoredCredential(name, MECHANISM, iterations, salt, _derive(password, salt, iterations))


TOKEN_SEPARATOR: Final = "."
TOKEN_SECRET_BYTES: Final = 32
TOKEN_SLOT_SEPARATOR: Final = "#"
"""Between a user's name and a token's id in the name a token is stored under (`alice#3f9c...`):
not a character of user names, so a token slot never collides with a user."""
_TOKEN_ID_HEX: Final = 12


def new_token(name: str) -> str:
    """A fresh random token for user `name`: `<name>.<secret>` (the secret is URL-safe base64,
    so it holds no dot). It is stored under its own slot (`token_slot`), beside the user's
    password and other tokens: a user may hold a password and any number of tokens."""
    validate_user_name(name)
    return f"{name}{TOKEN_SEPARATOR}{secrets.token_urlsafe(TOKEN_SECRET_BYTES)}"


def token_user(token: str) -> str | None:
    """The user a token names (the part before its last dot), or None when it names none."""
    name, sep, secret = token.rpartition(TOKEN_SEPARATOR)
    return name if sep and name and secret else None


def token_slot(token: str) -> str | None:
    """The name `token` is stored under: `<user>#<id>`, the id a digest of the token (so it
    tells nothing of the secret); None when the token names no user."""
    name = token_user(token)
    if name is None:
        return None
    digest = hashlib.sha256(token.encode()).hexdigest()[:_TOKEN_ID_HEX]
    return f"{name}{TOKEN_SLOT_SEPARATOR}{digest}"


def slot_owner(name: str) -> str:
    """The user a stored name belongs to: itself, or the user part of a token slot."""
    return name.partition(TOKEN_SLOT_SEPARATOR)[0]


def owners(names: Iterable[str]) -> set[str]:
    """The users that hold a password or a token among stored names."""
    return {slot_owner(n) for n in names}


def validate_stored_name(name: str) -> None:
    """RiverlogError(INVALID_REQUEST) unless `name` is a user name or a token slot of one."""
    user, sep, token_id = name.partition(TOKEN_SLOT_SEPARATOR)
    validate_user_name(user)
    if sep and not re.fullmatch(f"[0-9a-f]{{{_TOKEN_ID_HEX}}}", token_id):
        raise RiverlogError(
            f"invalid token slot {name!r}: <user>{TOKEN_SLOT_SEPARATOR}<token id>",
            ErrorCode.INVALID_REQUEST,
        )


def stored_credential(name: str, secret: str) -> StoredCredential:
    """The credential to store under `name`: a user's password, or under a token slot the token
    it was made from (INVALID_REQUEST when `secret` is not that slot's token)."""
    validate_stored_name(name)
    if TOKEN_SLOT_SEPARATOR in name and token_slot(secret) != name:
        raise RiverlogError(
            f"the secret given for {name!r} is not the token of that slot",
            ErrorCode.INVALID_REQUEST,
        )
    return dataclasses.replace(hash_password(slot_owner(name), secret), name=name)


class CredentialChecker:
    """The gateway's check of a call's username and password against the stored users.

    Lifecycle: one per gateway; `update` with the full user set at every change the watch
    delivers (swaps the table and drops remembered checks of changed users). Only the event
    loop calls it.
    """

    def __init__(self, users: Mapping[str, StoredCredential] | None = None) -> None:
        self._users: dict[str, StoredCredential] = dict(users or {})
        self._verified: dict[tuple[str, bytes], StoredCredential] = {}

    @property
    def users(self) -> Mapping[str, StoredCredential]:
        return self._users

    def update(self, users: Mapping[str, StoredCredential]) -> None:
        self._users = dict(users)
        self._verified = {k: c for k, c in self._verified.items() if users.get(k[0]) == c}

    def check(self, name: str, password: str) -> bool:
        """Whether `password` is `name`'s current password or one of `name`'s tokens."""
        slot = token_slot(password)
        candidates = [name] if slot is None or slot_owner(slot) != name else [name, slot]
        return any(self._check_stored(key, password) for key in candidates)

    def _check_stored(self, key: str, password: str) -> bool:
        stored = self._users.get(key)
        if stored is None:
            return False
        cache_key = (key, hashlib.sha256(password.encode()).digest())
        if self._verified.get(cache_key) == stored:
            return True
        if not stored.matches(password):
            return False
        if len(self._verified) >= _CACHE_MAX:
            self._verified.clear()
        self._verified[cache_key] = stored
        return True
