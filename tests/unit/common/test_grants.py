"""Grants of direct data access (decision 0047): a signed grant verifies to what was signed; a
change to any byte of it (every field, the MAC), another key, another node, its expiry and an
oversize grant are refused with the right code; the key file's rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import (
    MAC_BYTES,
    MAX_GRANT_BYTES,
    GrantOperation,
    load_key,
    new_grant,
    new_key,
    sign_grant,
    verify_grant,
)

KEY = b"k" * 32
NOW = 1_700_000_000_000


def _grant(**changes: object) -> bytes:
    fields: dict[str, object] = {
        "node_id": 3,
        "operation": GrantOperation.READ,
        "principal": "alice",
        "client_id": "app-1",
        "topics": frozenset({"orders", "payments"}),
        "byte_budget": 1 << 20,
        "now_ms": NOW,
        "lifetime_ms": 60_000,
    }
    fields.update(changes)
    return sign_grant(new_grant(**fields), KEY)  # type: ignore[arg-type]


def _code(data: bytes, key: bytes = KEY, node: int = 3, now: int = NOW + 1) -> ErrorCode:
    with pytest.raises(RiverlogError) as info:
        verify_grant(data, key, node, now)
    return info.value.code


def test_a_signed_grant_verifies_to_its_fields() -> None:
    grant = new_grant(
        node_id=3,
        operation=GrantOperation.WRITE,
        principal="alice",
        client_id="app-1",
        topics=frozenset({"orders", "ünïcode"}),
        byte_budget=5,
        now_ms=NOW,
        lifetime_ms=1_000,
    )
    assert len(grant.grant_id) == 16
    assert verify_grant(sign_grant(grant, KEY), KEY, 3, NOW + 999) == grant
    assert grant.covers("orders", GrantOperation.WRITE)
    assert not grant.covers("orders", GrantOperation.READ)
    assert not grant.covers("other", GrantOperation.WRITE)


def test_grants_get_fresh_ids() -> None:
    ids = {verify_grant(_grant(), KEY, 3, NOW).grant_id for _ in range(20)}
    assert len(ids) == 20


def test_every_byte_changed_is_refused() -> None:
    data = _grant()
    for i in range(len(data)):
        tampered = bytearray(data)
        tampered[i] ^= 0x40
        assert _code(bytes(tampered)) == ErrorCode.SASL_AUTHENTICATION_FAILED, i


def test_truncated_extended_and_empty_grants_are_refused() -> None:
    data = _grant()
    for bad in (b"", data[:10], data[:-1], data + b"\x00", data[:-MAC_BYTES]):
        assert _code(bad) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_another_key_and_another_node_are_refused() -> None:
    assert _code(_grant(), key=b"j" * 32) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert _code(_grant(), node=4) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_an_expired_grant_is_refused_with_its_own_code() -> None:
    data = _grant(lifetime_ms=100)
    assert verify_grant(data, KEY, 3, NOW + 99).expires_at_ms == NOW + 100
    assert _code(data, now=NOW + 100) == ErrorCode.DELEGATION_TOKEN_EXPIRED
    # a bad MAC is reported as such even when the grant would also be expired
    tampered = bytearray(data)
    tampered[-1] ^= 1
    assert _code(bytes(tampered), now=NOW + 10_000) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_an_oversize_grant_is_neither_issued_nor_accepted() -> None:
    many = frozenset(f"topic-{i:06d}-" + "x" * 200 for i in range(MAX_GRANT_BYTES // 200))
    with pytest.raises(RiverlogError) as info:
        _grant(topics=many)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert _code(b"\x01" * (MAX_GRANT_BYTES + 1)) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_forged_field_with_a_recomputed_mac_under_another_key_is_refused() -> None:
    # what an attacker without the key can do: sign its own grant with its own key
    forged = sign_grant(
        new_grant(
            node_id=3,
            operation=GrantOperation.WRITE,
            principal="mallory",
            client_id="x",
            topics=frozenset({"orders"}),
            byte_budget=1 << 40,
            now_ms=NOW,
            lifetime_ms=10**12,
        ),
        b"guessed-key-guessed-key-guessed!",
    )
    assert _code(forged) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_key_files(tmp_path: Path) -> None:
    good = tmp_path / "key"
    good.write_text(new_key() + "\n")
    assert len(load_key(good)) == 64
    short = tmp_path / "short"
    short.write_text("too-short")
    for path in (short, tmp_path / "missing"):
        with pytest.raises(RiverlogError) as info:
            load_key(path)
        assert info.value.code == ErrorCode.INVALID_CONFIG
    assert new_key() != new_key()
    assert os.path.getsize(good) == 65


def test_a_key_file_readable_beyond_its_owner_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "key"
    key.write_text(new_key() + "\n")
    key.chmod(0o400)
    with caplog.at_level("WARNING", logger="riverlog.common.grants"):
        load_key(key)
    assert not caplog.records
    key.chmod(0o440)  # the process's own group (a Kubernetes Secret with fsGroup)
    with caplog.at_level("WARNING", logger="riverlog.common.grants"):
        load_key(key)
    assert not caplog.records
    key.chmod(0o604)
    with caplog.at_level("WARNING", logger="riverlog.common.grants"):
        assert len(load_key(key)) == 64  # still loaded: a warning, not a refusal
    assert "mode 604" in caplog.text


def test_a_grant_holds_64_topics_of_the_longest_names() -> None:
    topics = frozenset(f"{i:02d}" + "t" * 247 for i in range(64))
    assert len(_grant(topics=topics)) <= MAX_GRANT_BYTES
