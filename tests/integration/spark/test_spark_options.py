"""Bad options of the `riverlog` source fail the query on the driver with a message that says
what is wrong, and records deleted before they were read are data loss: an error by default,
skipped with failOnDataLoss=false."""

from __future__ import annotations

import json

import pytest
from spark_helpers import produce

from riverlog.client import AdminClient
from riverlog.common.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _load(spark, bootstrap, **options):
    reader = spark.read.format("riverlog").option("riverlog.bootstrap", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_unknown_topic(spark, gateway_address, topic_name):
    with pytest.raises(Exception, match=rf"subscribe={topic_name}.*(unknown|does not exist)"):
        _load(spark, gateway_address, subscribe=topic_name).collect()


def test_malformed_offsets_json(spark, gateway_address, new_topic):
    topic = new_topic()
    with pytest.raises(Exception, match=r"'startingOffsets' is not valid JSON"):
        _load(spark, gateway_address, subscribe=topic, startingOffsets="{oops").collect()
    with pytest.raises(Exception, match=r"must map partitions to offsets"):
        _load(
            spark, gateway_address, subscribe=topic, endingOffsets=json.dumps({topic: 5})
        ).collect()


def test_both_subscribe_and_assign(spark, gateway_address, new_topic):
    topic = new_topic()
    with pytest.raises(
        Exception, match=r"exactly one of the options 'subscribe'.*given: subscribe, assign"
    ):
        _load(spark, gateway_address, subscribe=topic, assign=json.dumps({topic: [0]})).collect()


def test_missing_bootstrap_and_no_topic_option(spark, gateway_address):
    with pytest.raises(Exception, match=r"'riverlog.bootstrap'.*is required"):
        spark.read.format("riverlog").option("subscribe", "t").load().collect()
    with pytest.raises(Exception, match=r"exactly one of the options.*given: none"):
        _load(spark, gateway_address).collect()


def test_unknown_client_option(spark, gateway_address, new_topic):
    with pytest.raises(Exception, match=r"unknown consumer config 'fetch.max.wiat.ms'"):
        _load(
            spark, gateway_address, subscribe=new_topic(), **{"kafka.fetch.max.wiat.ms": "5"}
        ).collect()


def test_deleted_records_are_data_loss_unless_told_to_skip(spark, gateway_address, new_topic):
    topic = new_topic()
    produce(gateway_address, topic, [{"value": b"v%d" % i} for i in range(10)])
    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 4})
    start = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match=r"failOnDataLoss"):
        _load(spark, gateway_address, subscribe=topic, startingOffsets=start).collect()
    rows = _load(
        spark, gateway_address, subscribe=topic, startingOffsets=start, failOnDataLoss="false"
    ).collect()
    assert [r.offset for r in rows] == list(range(4, 10))
