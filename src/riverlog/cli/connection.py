"""How a command reaches the cluster: the bootstrap address and the SDK clients built from the
options.

The bootstrap address is, in order: `--bootstrap HOST:PORT[,HOST:PORT...]`, the environment
variable RIVERLOG_BOOTSTRAP, or the gateways of the local cluster recorded in the default data
directory (`$RIVERLOG_HOME`, else `~/.riverlog`) by `riverlog cluster up`. The options every
command that talks to a gateway shares (`--bootstrap`, `--client-id`, `--user`, `--password`,
`--token`, the last three defaulting to RIVERLOG_USER / RIVERLOG_PASSWORD / RIVERLOG_TOKEN)
are defined here, and so
is the topic look-up `produce` and `consume` do first, so an unknown topic fails at once with
its own error instead of after the SDK's max.block.ms.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from riverlog.client import AdminClient, TopicDescription
from riverlog.cluster import ClusterNotFoundError, LocalCluster

from .console import EXIT_USAGE, CliError

BOOTSTRAP_ENV: Final = "RIVERLOG_BOOTSTRAP"
USER_ENV: Final = "RIVERLOG_USER"
PASSWORD_ENV: Final = "RIVERLOG_PASSWORD"
TOKEN_ENV: Final = "RIVERLOG_TOKEN"
HOME_ENV: Final = "RIVERLOG_HOME"
DEFAULT_CLIENT_ID: Final = "riverlog-cli"


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$RIVERLOG_HOME`, else `~/.riverlog`: where `cluster up` keeps a cluster by default."""
    env = os.environ if env is None else env
    home = env.get(HOME_ENV)
    return Path(home).expanduser() if home else Path.home() / ".riverlog"


def parse_servers(text: str) -> str:
    """Validate `host:port[,host:port...]`; returns it normalised (no blanks)."""
    servers = [s.strip() for s in text.split(",") if s.strip()]
    if not servers:
        raise CliError("empty bootstrap address", EXIT_USAGE)
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CliError(f"bootstrap address {server!r} is not HOST:PORT", EXIT_USAGE)
    return ",".join(servers)


def local_cluster_bootstrap(data_dir: Path) -> str:
    """The running gateways of the local cluster in `data_dir`, comma-separated."""
    try:
        cluster = LocalCluster.attach(data_dir)
    except ClusterNotFoundError:
        raise CliError(
            "no bootstrap address: pass --bootstrap HOST:PORT, set "
            f"{BOOTSTRAP_ENV}, or start a local cluster with `riverlog cluster up`"
        ) from None
    live = [p.address for p in cluster.by_role("gateway") if p.alive and p.address]
    if not live:
        raise CliError(
            f"the local cluster in {data_dir} has no gateway running "
            "(`riverlog cluster up` starts it)"
        )
    return ",".join(live)


def resolve_bootstrap(
    explicit: str | None,
    env: Mapping[str, str] | None = None,
    data_dir: Path | None = None,
) -> str:
    """The gateway address(es) a command should use; raises CliError when none is known."""
    env = os.environ if env is None else env
    if explicit:
        return parse_servers(explicit)
    from_env = env.get(BOOTSTRAP_ENV, "").strip()
    if from_env:
        return parse_servers(from_env)
    return local_cluster_bootstrap(data_dir or default_data_dir(env))


def local_cluster_tls(
    explicit: str | None,
    env: Mapping[str, str] | None = None,
    data_dir: Path | None = None,
) -> dict[str, str]:
    """The SDK's TLS settings (security.protocol, ssl.ca.location) when the bootstrap address
    comes from a local cluster started with `cluster up --tls`; empty otherwise."""
    env = os.environ if env is None else env
    if explicit or env.get(BOOTSTRAP_ENV, "").strip():
        return {}
    try:
        return LocalCluster.attach(data_dir or default_data_dir(env)).client_tls_config
    except ClusterNotFoundError:
        return {}


def add_connection_args(parser: argparse.ArgumentParser, entity_options: bool = False) -> None:
    """`--bootstrap`, `--client-id`, `--user` and `--password`, for every command that talks to
    a gateway. With `entity_options` (the quotas command, whose `--user` and `--client-id` name
    the quota entity) the caller's own are `--auth-user` and `--auth-client-id`."""
    group = parser.add_argument_group("connection")
    prefix = "--auth-" if entity_options else "--"
    group.add_argument(
        f"{prefix}user",
        dest="auth_user",
        default=os.environ.get(USER_ENV) or None,
        help=f"authenticate as this user (default: ${USER_ENV}; none: ANONYMOUS)",
    )
    group.add_argument(
        "--password",
        dest="auth_password",
        default=os.environ.get(PASSWORD_ENV, ""),
        help=f"the user's password (default: ${PASSWORD_ENV})",
    )
    group.add_argument(
        "--token",
        dest="auth_token",
        default=os.environ.get(TOKEN_ENV, ""),
        help=f"authenticate with this token instead of --user/--password (default: ${TOKEN_ENV})",
    )
    group.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT",
        help=f"gateway address(es), comma-separated (default: ${BOOTSTRAP_ENV}, else the "
        "local cluster started by `riverlog cluster up`)",
    )
    group.add_argument(
        f"{prefix}client-id",
        dest="client_id",
        default=DEFAULT_CLIENT_ID,
        help=f"client id sent with every request (default: {DEFAULT_CLIENT_ID})",
    )


def key_value(text: str) -> tuple[str, str]:
    """argparse type for `KEY=VALUE` (a config by its Kafka name)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def client_config(
    args: argparse.Namespace, overrides: Iterable[tuple[str, str]] = ()
) -> dict[str, object]:
    """bootstrap.servers, client.id and the credentials from the options, then any
    `KEY=VALUE` overrides."""
    conf: dict[str, object] = {
        "bootstrap.servers": resolve_bootstrap(args.bootstrap),
        "client.id": args.client_id,
    }
    user = getattr(args, "auth_user", None)
    if user:
        conf["sasl.username"] = user
        conf["sasl.password"] = getattr(args, "auth_password", "") or ""
    token = getattr(args, "auth_token", "")
    if token and not user:
        conf["sasl.oauthbearer.token"] = token
    conf.update(local_cluster_tls(args.bootstrap))
    conf.update(dict(overrides))
    return conf


def admin_client(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_config(args))


def describe_topic(conf: dict[str, object], topic: str) -> TopicDescription:
    """The topic's partitions; raises RiverlogError (UNKNOWN_TOPIC_OR_PARTITION, ...) when the
    cluster cannot describe it."""
    admin_conf: dict[str, object] = {
        k: conf[k]
        for k in (
            "bootstrap.servers",
            "client.id",
            "sasl.username",
            "sasl.password",
            "sasl.oauthbearer.token",
            "security.protocol",
            "ssl.ca.location",
            "ssl.certificate.location",
            "ssl.key.location",
        )
        if k in conf
    }
    with AdminClient(admin_conf) as admin:
        return admin.describe_topics([topic])[topic]
