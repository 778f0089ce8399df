"""The console forwards each user's own credentials and has none of its own: the login form's
fields become the SDK's SASL-style keys, and credential keys given to the process are refused
(no shared superuser), as is a bad SDK key, before anything is served."""

from __future__ import annotations

import pytest

from riverlog.cli.console import EXIT_USAGE, CliError
from riverlog.cli.main import build_parser
from riverlog.client import ConfigError
from riverlog.console.sessions import SessionStore, credentials_conf


def test_the_login_form_becomes_the_sdks_credential_keys() -> None:
    assert credentials_conf("alice", "pw", "") == {"sasl.username": "alice", "sasl.password": "pw"}
    assert credentials_conf("alice", "pw", "tok") == {
        "sasl.username": "alice",
        "sasl.password": "pw",
    }
    assert credentials_conf("", "", "tok") == {"sasl.oauthbearer.token": "tok"}
    assert credentials_conf("", "", "") == {}  # ANONYMOUS, where the gateway allows it


@pytest.mark.parametrize("key", ["sasl.username", "sasl.password", "sasl.oauthbearer.token"])
def test_credentials_for_the_console_itself_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="only from the login form"):
        SessionStore("127.0.0.1:9092", {key: "admin"})


def test_sdk_settings_are_checked_at_start() -> None:
    store = SessionStore("127.0.0.1:9092", {"request.timeout.ms": "5000"})
    assert store.base_conf["request.timeout.ms"] == "5000"
    assert store.base_conf["client.id"] == "riverlog-console"
    assert store.base_conf["default.api.timeout.ms"] == 15_000  # pages do not hang a minute
    with pytest.raises(ConfigError, match=r"request\.timeout\.ms"):
        SessionStore("127.0.0.1:9092", {"request.timeout.ms": "soon"})
    with pytest.raises(ConfigError, match="unknown consumer config 'retries'"):
        SessionStore("127.0.0.1:9092", {"retries": "3"})  # the browser's consumer has no such key
    assert store.get(None) is None and store.get("unknown") is None
    store.close()


def test_the_cli_command_parses_and_refuses_shared_credentials() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["console", "--bootstrap", "127.0.0.1:9092", "--port", "0", "--sample-interval", "2"]
    )
    assert (args.host, args.port, args.sample_interval) == ("127.0.0.1", 0, 2.0)
    args = parser.parse_args(
        ["console", "--bootstrap", "127.0.0.1:9092", "-X", "sasl.username=root"]
    )
    with pytest.raises(CliError) as info:
        args.func(args)
    assert info.value.exit_code == EXIT_USAGE
    assert "only from the login form" in info.value.message
    with pytest.raises(SystemExit):
        parser.parse_args(["console", "--sample-interval", "0"])
