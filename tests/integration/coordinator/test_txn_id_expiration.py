"""transactional.id.expiration.ms on real processes (etcd, metadata, one storage node, one
coordinator, a gateway; the coordinator with a 2 s expiry swept every 200 ms): an id whose
transaction ended and that stays idle past the expiry is removed (gone from `transactions list`
and describe, SDK and CLI), while an id with a transaction still open is kept however old; a new
`init_transactions` with the removed id starts a fresh state (a new producer id, epoch 0), and
the old session, still holding the removed mapping, is fenced at its next transaction.

Coordinator behaviour more than SDK behaviour, so the sync SDK alone; a cluster of its own,
because the short expiry would remove the ids the other transaction tests keep between steps."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from txn_cluster import wait_for

from riverlog.client import AdminClient, FatalTransactionError, Producer
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode, RiverlogError

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
EXPIRATION_MS = 2000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    config = {
        "metadata": {
            "broker.heartbeat.interval.ms": "300",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "2",
        },
        "coordinator": {
            "transactional.id.expiration.ms": str(EXPIRATION_MS),
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
        },
    }
    with LocalCluster(
        Path(tmp_path_factory.mktemp("txn-expiry")),
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        extra_config=config,
    ) as local:
        yield local


def listed(admin: AdminClient) -> dict[str, str]:
    return {t.transactional_id: t.state for t in admin.list_transactions()}


def cli_listed(cluster: LocalCluster) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", "transactions", "list", "--json",
         "--bootstrap", cluster.gateway_address],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return {row["transactional_id"] for row in json.loads(run.stdout)}


def test_an_idle_id_expires_and_a_new_init_starts_fresh(cluster: LocalCluster) -> None:
    topic = unique_topic_name("expiry")
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    idle_id, open_id = "idle-" + topic, "open-" + topic
    conf = {"bootstrap.servers": cluster.gateway_address}
    old = Producer({**conf, "transactional.id": idle_id})
    holder = Producer({**conf, "transactional.id": open_id, "transaction.timeout.ms": 120_000})
    try:
        old.init_transactions(timeout=60)
        old.begin_transaction()
        old.send(topic, b"committed").result(timeout=60)
        old.commit_transaction(timeout=60)
        holder.init_transactions(timeout=60)
        holder.begin_transaction()
        holder.send(topic, b"open").result(timeout=60)
        with AdminClient(conf) as admin:
            before = admin.describe_transactions([idle_id])[idle_id]
            assert not isinstance(before, RiverlogError)
            wait_for(lambda: idle_id not in listed(admin), timeout_s=60, what="the expiry")
            gone = admin.describe_transactions([idle_id])[idle_id]
            assert isinstance(gone, RiverlogError)
            assert gone.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            # The open transaction's id is older than the expiry too, and is kept.
            assert listed(admin)[open_id] == "Ongoing"
            assert idle_id not in cli_listed(cluster)

            with Producer({**conf, "transactional.id": idle_id}) as new:
                new.init_transactions(timeout=60)
                fresh = admin.describe_transactions([idle_id])[idle_id]
                assert not isinstance(fresh, RiverlogError)
                assert (fresh.state, fresh.producer_epoch, fresh.partitions) == ("Empty", 0, ())
                assert fresh.producer_id != before.producer_id
                # The old session still has the removed mapping: refused for good.
                old.begin_transaction()
                old.send(topic, b"zombie")
                with pytest.raises(FatalTransactionError):
                    old.commit_transaction(timeout=60)
                new.begin_transaction()
                new.send(topic, b"fresh").result(timeout=60)
                new.commit_transaction(timeout=60)
            holder.abort_transaction(timeout=60)
    finally:
        old.close()
        holder.close()
