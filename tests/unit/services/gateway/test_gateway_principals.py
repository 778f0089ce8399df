"""Tokens and certificate names as principals: a token names its user and is checked as that
user's stored password; metadata credentials win over a verified client certificate's common
name, which wins over ANONYMOUS."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.credentials import (
    CredentialChecker,
    hash_password,
    new_token,
    token_user,
)
from riverlog.services.gateway.auth import Authenticator, credentials_of


def test_a_new_token_names_its_user_and_differs_every_time() -> None:
    first, second = new_token("svc.ingest"), new_token("svc.ingest")
    assert first != second
    assert token_user(first) == "svc.ingest"
    assert first.startswith("svc.ingest.") and len(first) > len("svc.ingest.") + 40
    assert token_user("no-dot") is None
    assert token_user("alice.") is None
    with pytest.raises(RiverlogError):
        new_token("ANONYMOUS")


def test_tokens_come_from_bearer_or_the_riverlog_key() -> None:
    token = new_token("alice")
    assert credentials_of([("authorization", f"Bearer {token}")]) == ("alice", token)
    assert credentials_of([("riverlog-token", token.encode())]) == ("alice", token)
    with pytest.raises(RiverlogError) as err:
        credentials_of([("authorization", "Bearer nodot")])
    assert err.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_token_is_checked_against_the_stored_hash_only() -> None:
    token = new_token("alice")
    stored = hash_password("alice", token, iterations=1000)
    assert token.encode() not in stored.hash and stored.salt
    auth = Authenticator(CredentialChecker({"alice": stored}), allow_anonymous=False)
    assert auth.principal([("authorization", f"Bearer {token}")]) == "alice"
    for wrong in (token[:-1] + ("A" if token[-1] != "A" else "B"), new_token("alice")):
        with pytest.raises(RiverlogError) as err:
            auth.principal([("authorization", f"Bearer {wrong}")])
        assert err.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    with pytest.raises(RiverlogError):
        auth.principal([("riverlog-token", new_token("mallory"))])


def test_precedence_metadata_then_certificate_then_anonymous() -> None:
    checker = CredentialChecker({"bob": hash_password("bob", "pw", iterations=1000)})
    open_gateway = Authenticator(checker, allow_anonymous=True)
    bob = [("riverlog-user", "bob"), ("riverlog-password", "pw")]
    assert open_gateway.principal(bob, certificate_name="alice") == "bob"
    assert open_gateway.principal([], certificate_name="alice") == "alice"
    assert open_gateway.principal([]) == "ANONYMOUS"
    closed = Authenticator(checker, allow_anonymous=False)
    assert closed.principal([], certificate_name="alice") == "alice"
    with pytest.raises(RiverlogError):
        closed.principal([])
    with pytest.raises(RiverlogError):
        closed.principal(
            [("riverlog-user", "bob"), ("riverlog-password", "x")], certificate_name="alice"
        )
