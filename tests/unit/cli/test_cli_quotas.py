"""`riverlog quotas` and `riverlog users` parsing: the entity options (names and defaults,
Kafka's eight levels), the caller's own identity options, and usage errors."""

from __future__ import annotations

import pytest

from riverlog.cli.commands.quotas import entity_of, entity_text
from riverlog.cli.connection import client_config
from riverlog.cli.console import CliError
from riverlog.cli.main import build_parser
from riverlog.common.quota.entity import DEFAULT, QuotaEntity


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "entity"),
    [
        (["--user", "alice"], QuotaEntity("alice", None)),
        (["--user", "alice", "--client-id", "app"], QuotaEntity("alice", "app")),
        (["--user", "alice", "--client-id-default"], QuotaEntity("alice", DEFAULT)),
        (["--user-default"], QuotaEntity(DEFAULT, None)),
        (["--user-default", "--client-id", "app"], QuotaEntity(DEFAULT, "app")),
        (["--user-default", "--client-id-default"], QuotaEntity(DEFAULT, DEFAULT)),
        (["--client-id", "app"], QuotaEntity(None, "app")),
        (["--client-id-default"], QuotaEntity(None, DEFAULT)),
    ],
)
def test_the_eight_levels(argv: list[str], entity: QuotaEntity) -> None:
    args = parse("quotas", "set", *argv, "--producer-byte-rate", "1024")
    assert entity_of(args) == entity
    assert args.producer_byte_rate == 1024.0


def test_an_entity_is_required_and_names_exclude_their_defaults() -> None:
    with pytest.raises(CliError, match="name the quota entity"):
        entity_of(parse("quotas", "set", "--producer-byte-rate", "1"))
    with pytest.raises(SystemExit):
        parse("quotas", "set", "--user", "a", "--user-default")


def test_the_callers_identity_is_separate_from_the_entity(monkeypatch) -> None:
    monkeypatch.setenv("RIVERLOG_BOOTSTRAP", "127.0.0.1:9092")
    args = parse(
        "quotas", "describe", "--user", "bob", "--auth-user", "admin", "--password", "pw",
        "--auth-client-id", "ops",
    )  # fmt: skip
    assert args.entity_user == "bob"
    conf = client_config(args)
    assert conf["sasl.username"] == "admin" and conf["sasl.password"] == "pw"
    assert conf["client.id"] == "ops"
    assert entity_text(QuotaEntity("bob", DEFAULT)) == "user=bob,client-id=<default>"


def test_every_gateway_command_takes_user_and_password(monkeypatch) -> None:
    monkeypatch.setenv("RIVERLOG_BOOTSTRAP", "127.0.0.1:9092")
    monkeypatch.setenv("RIVERLOG_PASSWORD", "from-env")
    args = parse("topics", "list", "--user", "alice")
    conf = client_config(args)
    assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", "from-env")
    anonymous = client_config(parse("users", "list"))
    assert "sasl.username" not in anonymous


def test_values_print_as_typed() -> None:
    from riverlog.cli.commands.quotas import number

    assert (number(1048576.0), number(12.5)) == ("1048576", "12.5")


def test_token_option_and_env_send_a_bearer_token(monkeypatch) -> None:
    monkeypatch.setenv("RIVERLOG_BOOTSTRAP", "127.0.0.1:9092")
    conf = client_config(parse("topics", "list", "--token", "alice.abc"))
    assert conf["sasl.oauthbearer.token"] == "alice.abc" and "sasl.username" not in conf
    monkeypatch.setenv("RIVERLOG_TOKEN", "svc.xyz")
    assert client_config(parse("users", "list"))["sasl.oauthbearer.token"] == "svc.xyz"
    both = client_config(parse("topics", "list", "--user", "bob", "--password", "pw"))
    assert both["sasl.username"] == "bob" and "sasl.oauthbearer.token" not in both


def test_users_add_new_token_prints_it_once_and_stores_it(monkeypatch, capsys) -> None:
    from riverlog.cli.commands import users
    from riverlog.common.quota.credentials import token_slot, token_user

    stored: list[tuple[str, str]] = []

    class FakeAdmin:
        def __enter__(self) -> FakeAdmin:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def upsert_user(self, name: str, password: str) -> None:
            stored.append((name, password))

    monkeypatch.setattr(users, "admin_client", lambda args: FakeAdmin())
    args = parse("users", "add", "svc", "--new-token", "--bootstrap", "127.0.0.1:9092")
    assert args.func(args) == 0
    printed = capsys.readouterr().out.strip()
    # Stored under its own slot, beside svc's password (which is not touched).
    assert token_user(printed) == "svc" and stored == [(token_slot(printed), printed)]
    with pytest.raises(SystemExit):
        parse("users", "add", "svc", "--new-token", "--new-password", "pw")
