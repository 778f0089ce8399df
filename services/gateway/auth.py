"""Who is calling: the user principal of a gateway call, from its gRPC metadata or certificate.

A call names its user in `riverlog-user` and `riverlog-password` (or the standard
`authorization: Basic base64(user:password)`), or carries a token (`riverlog-token`, or
`authorization: Bearer <token>`; a token is `<user>.<secret>` and is stored as that user's
password), checked against the users stored through the metadata service (salted PBKDF2 hashes
that arrive with the quota watch). Precedence: credentials in the metadata, then the common name
of a verified TLS client certificate, then ANONYMOUS when the gateway allows unauthenticated
clients (`allow.anonymous`, default true, as a Kafka PLAINTEXT listener); otherwise the call is
refused. A wrong password, a wrong token or an unknown user is refused with
SASL_AUTHENTICATION_FAILED (gRPC UNAUTHENTICATED) and a message that does not say which.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.credentials import CredentialChecker, token_user
from riverlog.common.quota.entity import ANONYMOUS

USER_KEY: Final = "riverlog-user"
PASSWORD_KEY: Final = "riverlog-password"
TOKEN_KEY: Final = "riverlog-token"
AUTHORIZATION_KEY: Final = "authorization"

OPEN_METHODS: Final = frozenset({"DescribeCluster"})
"""Served to ANONYMOUS even where unauthenticated clients are refused: readiness probes and
`riverlog cluster status` ask it before anyone can hold credentials (node addresses only)."""


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def credentials_of(metadata: Iterable[tuple[str, str | bytes]]) -> tuple[str, str] | None:
    """(user, password) from a call's metadata, or None when it carries none. A malformed
    `authorization` value is refused."""
    user: str | None = None
    password = ""
    basic: str | None = None
    token: str | None = None
    for key, value in metadata:
        if key == USER_KEY:
            user = _text(value)
        elif key == PASSWORD_KEY:
            password = _text(value)
        elif key == TOKEN_KEY:
            token = _text(value).strip()
        elif key == AUTHORIZATION_KEY:
            text = _text(value)
            if text[:6].lower() == "basic ":
                basic = text[6:].strip()
            elif text[:7].lower() == "bearer ":
                token = text[7:].strip()
    if user is not None:
        return user, password
    if token is not None:
        name = token_user(token)
        if name is None:
            raise RiverlogError(
                "malformed token: expected <user>.<secret> as `riverlog users add --token` prints",
                ErrorCode.SASL_AUTHENTICATION_FAILED,
            )
        return name, token
    if basic is None:
        return None
    try:
        decoded = base64.b64decode(basic, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise RiverlogError(
            "malformed authorization header: expected Basic base64(user:password)",
            ErrorCode.SASL_AUTHENTICATION_FAILED,
        ) from None
    name, _, secret = decoded.partition(":")
    return name, secret


class Authenticator:
    """Maps a call's metadata to its principal. One per gateway; `checker.update` runs on
    every user change the quota watch delivers. Only the event loop calls it."""

    def __init__(self, checker: CredentialChecker, allow_anonymous: bool = True) -> None:
        self.checker = checker
        self.allow_anonymous = allow_anonymous

    def principal(
        self,
        metadata: Iterable[tuple[str, str | bytes]],
        anonymous_ok: bool = False,
        certificate_name: str | None = None,
    ) -> str:
        """The user name (or ANONYMOUS); RiverlogError(SASL_AUTHENTICATION_FAILED) otherwise.
        `anonymous_ok`: a call without credentials is ANONYMOUS even if the gateway refuses
        unauthenticated clients (OPEN_METHODS); wrong credentials are refused all the same.
        `certificate_name`: the common name of the call's verified TLS client certificate,
        the principal when the metadata carries no credentials (Kafka's SSL principal)."""
        credentials = credentials_of(metadata)
        if credentials is None:
            if certificate_name:
                return certificate_name
            if self.allow_anonymous or anonymous_ok:
                return ANONYMOUS
            raise RiverlogError(
                "this gateway does not allow unauthenticated clients: send a user and password"
                f" ({USER_KEY} / {PASSWORD_KEY} metadata, or the CLI's --user / --password)"
                f", a token ({TOKEN_KEY}) or a client certificate",
                ErrorCode.SASL_AUTHENTICATION_FAILED,
            )
        user, password = credentials
        if not self.checker.check(user, password):
            raise RiverlogError(
                f"authentication failed for user {user!r}: unknown user or wrong password or token",
                ErrorCode.SASL_AUTHENTICATION_FAILED,
            )
        return user
