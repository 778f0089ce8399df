"""Option parsing of the `riverlog` source, without Spark or a cluster: Kafka's option names,
exactly one topic selector, offset JSON, client keys behind their prefixes, clear errors."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from riverlog.spark.options import (
    RiverlogOptionError,
    parse_read_options,
    parse_write_options,
)

BOOT = {"riverlog.bootstrap": "127.0.0.1:9092"}


def test_defaults_follow_kafka_batch_earliest_stream_latest():
    batch = parse_read_options({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.selection.subscribe == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss is True
    stream = parse_read_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting.kind == "latest"


def test_options_are_case_insensitive_and_offsets_json_is_parsed():
    opts = parse_read_options(
        {
            "RIVERLOG.BOOTSTRAP": "h:1",
            "Assign": '{"t": [1, 0]}',
            "startingOffsets": '{"t": {"0": 5, "1": -2}}',
            "endingOffsets": '{"t": {"0": -1, "1": 9}}',
            "minPartitions": "4",
            "failOnDataLoss": "False",
        },
        streaming=False,
    )
    assert opts.bootstrap == "h:1"
    assert opts.selection.assign == (("t", 0), ("t", 1))
    assert dict(opts.starting.per_partition) == {("t", 0): 5, ("t", 1): -2}
    assert dict(opts.ending.per_partition) == {("t", 0): -1, ("t", 1): 9}
    assert opts.min_partitions == 4
    assert opts.fail_on_data_loss is False


def test_starting_and_ending_timestamps():
    opts = parse_read_options({**BOOT, "subscribe": "t", "startingTimestamp": "17"}, streaming=True)
    assert (opts.starting.kind, opts.starting.timestamp) == ("timestamp", 17)
    opts = parse_read_options(
        {**BOOT, "subscribe": "t", "endingOffsetsByTimestamp": '{"t": {"0": 99}}'},
        streaming=False,
    )
    assert opts.ending.kind == "timestamps"
    assert dict(opts.ending.per_partition) == {("t", 0): 99}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
        ({}, r"given: none"),
        ({"subscribe": " , "}, "names no topic"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"assign": '{"t": 0}'}, "list of partition numbers"),
        ({"subscribe": "t", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "not a partition number"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": -7}}'}, "must be an offset"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "cannot be 'latest' for a batch"),
        ({"subscribe": "t", "minPartitions": "zero"}, "must be an integer"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({"subscribe": "t", "kafka.fetch.max.wiat.ms": "1"}, "unknown consumer config"),
    ],
)
def test_bad_read_options(options, message):
    with pytest.raises(RiverlogOptionError, match=message):
        parse_read_options({**BOOT, **options}, streaming=False)


def test_bootstrap_is_required_and_kafka_alias_works():
    with pytest.raises(RiverlogOptionError, match="is required"):
        parse_read_options({"subscribe": "t"}, streaming=False)
    opts = parse_read_options({"kafka.bootstrap.servers": "h:2", "subscribe": "t"}, streaming=False)
    assert opts.bootstrap == "h:2"
    assert "bootstrap.servers" not in opts.consumer_conf


def test_endingoffsets_is_for_batch_only():
    for key in ("endingOffsets", "endingTimestamp"):
        with pytest.raises(RiverlogOptionError, match="batch reads only"):
            parse_read_options({**BOOT, "subscribe": "t", key: "5"}, streaming=True)


def test_write_options_pass_producer_keys_through():
    opts = parse_write_options(
        {
            **BOOT,
            "topic": "out",
            "riverlog.producer.linger.ms": "20",
            "kafka.compression.type": "zstd",
        }
    )
    assert opts.topic == "out"
    assert opts.producer_config() == {
        "linger.ms": "20",
        "compression.type": "zstd",
        "bootstrap.servers": "127.0.0.1:9092",
    }
    with pytest.raises(RiverlogOptionError, match="unknown producer config"):
        parse_write_options({**BOOT, "kafka.lingr.ms": "1"})
