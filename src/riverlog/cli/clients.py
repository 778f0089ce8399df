"""The SDK clients as the commands use them: built from the parsed options (bootstrap address,
client id, `--*-property KEY=VALUE` overrides by Kafka name), and the topic look-up that
`produce` and `consume` do first so an unknown topic fails at once with its own error instead
of after the SDK's max.block.ms.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from riverlog.client import AdminClient, TopicDescription

from .bootstrap import resolve_bootstrap


def client_config(
    args: argparse.Namespace, overrides: Iterable[tuple[str, str]] = ()
) -> dict[str, object]:
    """bootstrap.servers and client.id from the options, then any `KEY=VALUE` overrides."""
    conf: dict[str, object] = {
        "bootstrap.servers": resolve_bootstrap(args.bootstrap),
        "client.id": args.client_id,
    }
    conf.update(dict(overrides))
    return conf


def admin_client(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_config(args))


def describe_topic(conf: dict[str, object], topic: str) -> TopicDescription:
    """The topic's partitions; raises RiverlogError (UNKNOWN_TOPIC_OR_PARTITION, ...) when the
    cluster cannot describe it."""
    admin_conf: dict[str, object] = {
        k: conf[k] for k in ("bootstrap.servers", "client.id") if k in conf
    }
    with AdminClient(admin_conf) as admin:
        return admin.describe_topics([topic])[topic]
