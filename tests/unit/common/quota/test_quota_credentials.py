"""Stored credentials: a salted hash (never the password), the check, and the cache that makes
a repeated call cheap without outliving a password change."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.credentials import (
    MECHANISM,
    CredentialChecker,
    StoredCredential,
    hash_password,
)


def test_a_credential_keeps_a_salted_hash_and_never_the_password() -> None:
    first = hash_password("alice", "s3cret", iterations=1000)
    second = hash_password("alice", "s3cret", iterations=1000)
    assert first.mechanism == MECHANISM and first.iterations == 1000
    assert len(first.salt) == 16 and first.salt != second.salt
    assert first.hash != second.hash  # same password, different salt
    assert b"s3cret" not in first.hash + first.salt
    assert first.matches("s3cret") and not first.matches("s3cret ")


@pytest.mark.parametrize("name", ["", "<default>", "ANONYMOUS", "a b", "x" * 256, "é"])
def test_reserved_or_odd_user_names_are_refused(name: str) -> None:
    with pytest.raises(RiverlogError) as info:
        hash_password(name, "pw")
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_an_empty_password_is_refused() -> None:
    with pytest.raises(RiverlogError, match="empty"):
        hash_password("bob", "")


def test_an_unknown_mechanism_never_matches() -> None:
    good = hash_password("bob", "pw", iterations=1000)
    other = StoredCredential("bob", "scram-sha-512", good.iterations, good.salt, good.hash)
    assert not other.matches("pw")


def test_the_checker_remembers_verified_pairs_until_the_user_changes() -> None:
    alice = hash_password("alice", "one", iterations=1000)
    checker = CredentialChecker({"alice": alice})
    assert checker.check("alice", "one")
    assert not checker.check("alice", "two")
    assert not checker.check("mallory", "one")
    calls = []
    original = StoredCredential.matches

    def counting(self: StoredCredential, password: str) -> bool:
        calls.append(password)
        return original(self, password)

    StoredCredential.matches = counting  # type: ignore[method-assign]
    try:
        assert checker.check("alice", "one")  # remembered: no PBKDF2 again
        assert calls == []
        checker.update({"alice": hash_password("alice", "two", iterations=1000)})
        assert not checker.check("alice", "one")  # the old password is gone at once
        assert checker.check("alice", "two")
        checker.update({})
        assert not checker.check("alice", "two")  # deleted user
    finally:
        StoredCredential.matches = original  # type: ignore[method-assign]
