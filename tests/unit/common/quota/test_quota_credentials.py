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
    new_token,
    owners,
    slot_owner,
    stored_credential,
    token_slot,
    validate_stored_name,
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


def test_a_user_holds_a_password_and_several_tokens_at_once() -> None:
    first, second = new_token("svc"), new_token("svc")
    slot1, slot2 = token_slot(first), token_slot(second)
    assert slot1 and slot2 and slot1 != slot2
    assert slot_owner(slot1) == "svc" and slot1.startswith("svc#")
    assert first.rpartition(".")[2][:12] not in slot1  # the id is a digest, not the secret
    users = {
        "svc": stored_credential(
            "svc",
            "the-password",
        ),
        slot1: stored_credential(slot1, first),
        slot2: stored_credential(slot2, second),
    }
    assert owners(users) == {"svc"}
    checker = CredentialChecker(users)
    assert checker.check("svc", "the-password")
    assert checker.check("svc", first) and checker.check("svc", second)
    assert not checker.check("svc", new_token("svc"))  # a token never stored
    assert not checker.check("other", first)  # a token is its own user's only
    # Deleting one token (its slot) leaves the password and the other token working.
    checker.update({k: v for k, v in users.items() if k != slot1})
    assert not checker.check("svc", first)
    assert checker.check("svc", second) and checker.check("svc", "the-password")


def test_a_legacy_token_stored_as_the_password_still_works() -> None:
    token = new_token("svc")
    checker = CredentialChecker({"svc": hash_password("svc", token)})
    assert checker.check("svc", token)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("svc#0123456789ab", "svc.not-the-token-of-this-slot"),  # the slot is not this token's
        ("svc#xyz", "svc.abc"),  # not a token id
        ("#0123456789ab", "x"),  # no user
        ("<default>#0123456789ab", "y"),  # a reserved name
    ],
)
def test_a_token_slot_takes_only_its_own_token(name: str, secret: str) -> None:
    with pytest.raises(RiverlogError) as info:
        stored_credential(name, secret)
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_a_token_slot_for_another_user_is_refused() -> None:
    token = new_token("alice")
    slot = token_slot(token)
    assert slot is not None
    with pytest.raises(RiverlogError):
        stored_credential(slot.replace("alice", "mallory"), token)
    with pytest.raises(RiverlogError):
        validate_stored_name("a b#0123456789ab")
