"""Stored user credentials: a salted PBKDF2-SHA256 hash, never the password, and the check.

The metadata service hashes a password once when an operator adds a user and stores only the
salt, the iteration count and the derived key in etcd; gateways receive those (through the
quota watch) and check the username and password a call carries against them. Kafka's SCRAM
stores the same three things; here the client sends the password itself over the channel (TLS,
when on, protects it), so the check is a recomputation. PBKDF2 is deliberately slow, and a gRPC
call carries its credentials on every request (Kafka authenticates a connection once), so
`CredentialChecker` remembers which (user, password digest) pairs it has verified against which
stored credential: a repeated call costs one SHA-256, and a changed or deleted user invalidates
its entries at once. Pure: no grpc, no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
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


def new_token(name: str) -> str:
    """A fresh random token for user `name`: `<name>.<secret>` (the secret is URL-safe base64,
    so it holds no dot). It is stored as that user's password (one PBKDF2 hash, never the
    token), so a user has a password or a token, whichever was set last."""
    validate_user_name(name)
    return f"{name}{TOKEN_SEPARATOR}{secrets.token_urlsafe(TOKEN_SECRET_BYTES)}"


def token_user(token: str) -> str | None:
    """The user a token names (the part before its last dot), or None when it names none."""
    name, sep, secret = token.rpartition(TOKEN_SEPARATOR)
    return name if sep and name and secret else None


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
        """Whether `password` is `name`'s current password."""
        stored = self._users.get(name)
        if stored is None:
            return False
        key = (name, hashlib.sha256(password.encode()).digest())
        if self._verified.get(key) == stored:
            return True
        if not stored.matches(password):
            return False
        if len(self._verified) >= _CACHE_MAX:
            self._verified.clear()
        self._verified[key] = stored
        return True
