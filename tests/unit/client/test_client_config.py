"""Config tables: Kafka names from dicts and keyword arguments, conversion of string values,
clear errors naming the key for unknown, unsupported, missing and out-of-range settings."""

from __future__ import annotations

import pytest

from riverlog.client.config import AdminConfig, ConfigError, ConsumerConfig, ProducerConfig

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_kafka_defaults() -> None:
    c = ProducerConfig.from_kafka(BOOT)
    assert c.bootstrap_servers == ("127.0.0.1:9092",)
    assert (c.batch_size, c.linger_ms, c.buffer_memory, c.max_block_ms) == (
        16384,
        5,
        33554432,
        60000,
    )
    assert (c.acks, c.retries, c.delivery_timeout_ms, c.retry_backoff_ms) == (
        -1,
        2**31 - 1,
        120000,
        100,
    )
    assert c.max_in_flight_requests_per_connection == 5
    assert c.compression_type == "none"
    k = ConsumerConfig.from_kafka(BOOT)
    assert (k.max_poll_records, k.fetch_min_bytes, k.fetch_max_wait_ms) == (500, 1, 500)
    assert (k.fetch_max_bytes, k.max_partition_fetch_bytes) == (52428800, 0)  # 0: automatic
    assert k.auto_offset_reset == "latest"


def test_dict_and_keywords_with_underscores() -> None:
    c = ProducerConfig.from_kafka(
        {"bootstrap.servers": "a:1, b:2", "linger.ms": "7", "acks": "all"},
        batch_size=100,
        compression_type="ZSTD",
        max_in_flight_requests_per_connection=1,
    )
    assert c.bootstrap_servers == ("a:1", "b:2")
    assert (c.linger_ms, c.batch_size, c.acks) == (7, 100, -1)
    assert c.compression_type == "zstd"
    assert c.max_in_flight_requests_per_connection == 1
    assert c.get("linger.ms") == 7


@pytest.mark.parametrize(("value", "acks"), [("0", 0), (1, 1), ("all", -1), (-1, -1), ("-1", -1)])
def test_acks_forms(value: object, acks: int) -> None:
    assert ProducerConfig.from_kafka(BOOT, acks=value).acks == acks


def test_unknown_key_names_it_and_suggests() -> None:
    with pytest.raises(ConfigError, match=r"unknown producer config 'linger\.mss'.*'linger\.ms'"):
        ProducerConfig.from_kafka({**BOOT, "linger.mss": 5})
    with pytest.raises(ConfigError, match="unknown consumer config 'acks'"):
        ConsumerConfig.from_kafka(BOOT, acks=1)
    assert issubclass(ConfigError, ValueError)


def test_transactional_id_implies_idempotence_and_refuses_what_conflicts() -> None:
    config = ProducerConfig.from_kafka(BOOT, transactional_id="t")
    assert config.enable_idempotence and config.acks == -1
    assert config.transaction_timeout_ms == 60_000
    with pytest.raises(ConfigError, match=r"transactional\.id without also enabling idempotence"):
        ProducerConfig.from_kafka(BOOT, transactional_id="t", enable_idempotence=False)
    with pytest.raises(ConfigError, match="acks to all"):
        ProducerConfig.from_kafka(BOOT, transactional_id="t", acks=1)
    assert not ProducerConfig.from_kafka(BOOT, acks=1).enable_idempotence  # unchanged


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("linger.ms", -1, "linger.ms: -1 is below the minimum 0"),
        ("batch.size", "big", "batch.size: expected an integer"),
        ("batch.size", True, "batch.size: expected an integer"),
        ("acks", 2, "acks: 2 is not one of"),
        ("compression.type", "brotli", "compression.type: 'brotli' is not one of"),
        ("bootstrap.servers", "localhost", "'localhost' is not host:port"),
        ("bootstrap.servers", 9092, "expected 'host:port"),
        ("partitioner.ignore.keys", "maybe", "expected true or false"),
        ("key.serializer", "str", "expected a callable"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        ProducerConfig.from_kafka({**BOOT, key: value})


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ConfigError, match=r"'bootstrap\.servers' is required"):
        AdminConfig.from_kafka({})


def test_cross_key_checks() -> None:
    with pytest.raises(ConfigError, match=r"delivery\.timeout\.ms"):
        ProducerConfig.from_kafka(BOOT, delivery_timeout_ms=1000, request_timeout_ms=30000)
    with pytest.raises(ConfigError, match=r"retry\.backoff\.max\.ms"):
        ConsumerConfig.from_kafka(BOOT, retry_backoff_ms=500, retry_backoff_max_ms=100)


def test_consumer_choices_and_bools() -> None:
    c = ConsumerConfig.from_kafka(BOOT, auto_offset_reset="EARLIEST", check_crcs="false")
    assert c.auto_offset_reset == "earliest" and c.check_crcs is False
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        ConsumerConfig.from_kafka(BOOT, auto_offset_reset="smallest")


def test_every_key_has_a_parser_and_doc() -> None:
    for cls in (ProducerConfig, ConsumerConfig, AdminConfig):
        for name, field in cls.keys().items():
            assert "." in name or name in ("acks", "retries")
            assert callable(field.metadata["parse"]) and field.metadata["doc"]


def test_configs_are_frozen() -> None:
    c = ProducerConfig.from_kafka(BOOT)
    with pytest.raises(AttributeError):
        c.linger_ms = 1  # type: ignore[misc]


def test_group_keys() -> None:
    config = ConsumerConfig.from_kafka(BOOT, group_id="g")
    assert config.enable_auto_commit and config.auto_commit_interval_ms == 5000
    assert config.session_timeout_ms == 45_000 and config.heartbeat_interval_ms == 3000
    assert config.partition_assignment_strategy == ("range", "cooperative-sticky")
    kafka_names = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, roundrobin"
    config = ConsumerConfig.from_kafka({**BOOT, "partition.assignment.strategy": kafka_names})
    assert config.partition_assignment_strategy == ("cooperative-sticky", "roundrobin")
    with pytest.raises(ConfigError, match="unknown assignor 'fair'"):
        ConsumerConfig.from_kafka({**BOOT, "partition.assignment.strategy": "fair"})
    with pytest.raises(ConfigError, match=r"heartbeat\.interval\.ms"):
        ConsumerConfig.from_kafka(BOOT, session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ConfigError, match=r"group\.instance\.id needs group\.id"):
        ConsumerConfig.from_kafka(BOOT, group_instance_id="i")
