"""The `riverlog` source's options, parsed once on the driver into frozen values that pickle
cheaply to every task, with Spark's Kafka source's names so that code ports with few changes.

Spark hands options over as a case-insensitive map of strings (`dict(options)` lower-cases the
keys), so every name here is looked up lower-cased. Exactly one of `subscribe`,
`subscribePattern` and `assign` selects the topics. Client settings use Kafka's key names behind
a prefix: `riverlog.consumer.<key>` for reads, `riverlog.producer.<key>` for writes, and Spark's
own `kafka.<key>` for whichever client the query uses (`kafka.bootstrap.servers` is another name
for `riverlog.bootstrap`). They are checked on the driver by building the SDK's config objects,
so a misspelt key fails the query before any task starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from riverlog.client import ConsumerConfig, ProducerConfig

BOOTSTRAP = "riverlog.bootstrap"
CONSUMER_PREFIX = "riverlog.consumer."
PRODUCER_PREFIX = "riverlog.producer."
KAFKA_PREFIX = "kafka."
TRANSACTIONAL = "riverlog.transactional"
TRANSACTIONAL_ID_PREFIX = "riverlog.transactional.id.prefix"

EARLIEST = -2
LATEST = -1


class RiverlogOptionError(ValueError):
    """An option of the `riverlog` data source is missing, malformed or contradictory."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a range starts or ends: `earliest`, `latest`, a timestamp for every partition, or
    per-partition values ({topic: {partition: offset}}, -2 earliest and -1 latest)."""

    kind: str  # "earliest" | "latest" | "timestamp" | "offsets" | "timestamps"
    timestamp: int = -1
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise RiverlogOptionError(
            f"option {name!r} is not valid JSON ({e.msg}): {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise RiverlogOptionError(f"option {name!r} must be a JSON object, not {text!r}")
    return value


def _int_option(options: Mapping[str, str], name: str, default: int | None, lo: int) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise RiverlogOptionError(f"option {name!r} must be an integer, not {text!r}") from None
    if value < lo:
        raise RiverlogOptionError(f"option {name!r} must be at least {lo}, not {value}")
    return value


def parse_partition_map(name: str, text: str) -> dict[tuple[str, int], int]:
    """`{"topic": {"0": 23, "1": -2}}` → {(topic, 0): 23, (topic, 1): -2}."""
    out: dict[tuple[str, int], int] = {}
    for topic, partitions in _json_object(name, text).items():
        if not isinstance(partitions, dict):
            raise RiverlogOptionError(
                f"option {name!r}: topic {topic!r} must map partitions to offsets, as in "
                f'{{"{topic}": {{"0": 23, "1": -2}}}}'
            )
        for partition, value in partitions.items():
            try:
                p = int(partition)
            except ValueError:
                raise RiverlogOptionError(
                    f"option {name!r}: {partition!r} of topic {topic!r} is not a partition number"
                ) from None
            if not isinstance(value, int) or isinstance(value, bool) or value < -2:
                raise RiverlogOptionError(
                    f"option {name!r}: {topic}-{p} must be an offset (or -2 earliest, -1 "
                    f"latest), not {value!r}"
                )
            out[(topic, p)] = value
    return out


def parse_offset_spec(name: str, text: str | None, default: str) -> OffsetSpec:
    value = (text if text is not None else default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    return OffsetSpec("offsets", per_partition=parse_partition_map(name, value))


@dataclass(frozen=True, slots=True)
class TopicSelection:
    """Which topics (or partitions) a read covers: exactly one of the three is set."""

    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        if self.subscribe:
            return f"subscribe={','.join(self.subscribe)}"
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        return f"assign={sorted(self.assign)}"


def parse_selection(options: Mapping[str, str]) -> TopicSelection:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        which = ", ".join(given) if given else "none"
        raise RiverlogOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"set (given: {which})"
        )
    if "subscribe" in options:
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise RiverlogOptionError("option 'subscribe' names no topic")
        return TopicSelection(subscribe=topics)
    if "subscribepattern" in options:
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise RiverlogOptionError(f"option 'subscribePattern' {pattern!r}: {e}") from None
        return TopicSelection(pattern=pattern)
    assigned: list[tuple[str, int]] = []
    for topic, partitions in _json_object("assign", options["assign"]).items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise RiverlogOptionError(
                f"option 'assign': topic {topic!r} must map to a list of partition numbers, "
                f'as in {{"{topic}": [0, 1]}}'
            )
        assigned += [(topic, p) for p in partitions]
    if not assigned:
        raise RiverlogOptionError("option 'assign' names no partition")
    return TopicSelection(assign=tuple(sorted(set(assigned))))


def _client_conf(options: Mapping[str, str], prefix: str) -> dict[str, str]:
    conf: dict[str, str] = {}
    for key, value in options.items():
        for p in (KAFKA_PREFIX, prefix):
            if key.startswith(p) and key != KAFKA_PREFIX + "bootstrap.servers":
                conf[key[len(p) :]] = value
    return conf


def bootstrap(options: Mapping[str, str]) -> str:
    servers = options.get(BOOTSTRAP) or options.get(KAFKA_PREFIX + "bootstrap.servers")
    if not servers:
        raise RiverlogOptionError(
            f"option {BOOTSTRAP!r} (the gateway addresses, host:port[,host:port]) is required"
        )
    return servers


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Everything a read needs, parsed on the driver; pickled into each task."""

    bootstrap: str
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    consumer_conf: Mapping[str, str]

    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig.from_kafka(
            {**self.consumer_conf, "bootstrap.servers": self.bootstrap}
        )

    @property
    def read_committed(self) -> bool:
        """`kafka.isolation.level=read_committed`: plan up to the last stable offsets and drop
        aborted transactions' records."""
        return self.consumer_config().isolation_level == "read_committed"


def parse_read_options(raw: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Parse and check a read's options (`streaming` picks Kafka's defaults: batch reads start
    at earliest, streams at latest; `endingOffsets` is for batch reads only)."""
    options = _lower(raw)
    selection = parse_selection(options)
    timestamp = _int_option(options, "startingTimestamp", None, 0)
    if timestamp is not None:
        starting = OffsetSpec("timestamp", timestamp=timestamp)
    elif "startingoffsetsbytimestamp" in options:
        starting = OffsetSpec(
            "timestamps",
            per_partition=parse_partition_map(
                "startingOffsetsByTimestamp", options["startingoffsetsbytimestamp"]
            ),
        )
    else:
        starting = parse_offset_spec(
            "startingOffsets", options.get("startingoffsets"), "latest" if streaming else "earliest"
        )
    ending_keys = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    if streaming and any(k in options for k in ending_keys):
        raise RiverlogOptionError("the options 'endingOffsets...' are for batch reads only")
    end_timestamp = _int_option(options, "endingTimestamp", None, 0)
    if end_timestamp is not None:  # the end is the first offset at or after it (exclusive)
        ending = OffsetSpec("timestamp", timestamp=end_timestamp)
    elif "endingoffsetsbytimestamp" in options:
        ending = OffsetSpec(
            "timestamps",
            per_partition=parse_partition_map(
                "endingOffsetsByTimestamp", options["endingoffsetsbytimestamp"]
            ),
        )
    else:
        ending = parse_offset_spec("endingOffsets", options.get("endingoffsets"), "latest")
    if ending.kind == "earliest":
        raise RiverlogOptionError("option 'endingOffsets' cannot be 'earliest'")
    if not streaming and starting.kind == "latest":
        raise RiverlogOptionError("option 'startingOffsets' cannot be 'latest' for a batch read")
    fail = options.get("failondataloss", "true").strip().lower()
    if fail not in ("true", "false"):
        raise RiverlogOptionError(f"option 'failOnDataLoss' must be true or false, not {fail!r}")
    read = ReadOptions(
        bootstrap=bootstrap(options),
        selection=selection,
        starting=starting,
        ending=ending,
        fail_on_data_loss=fail == "true",
        min_partitions=_int_option(options, "minPartitions", None, 1),
        max_offsets_per_trigger=_int_option(options, "maxOffsetsPerTrigger", None, 1),
        consumer_conf=_client_conf(options, CONSUMER_PREFIX),
    )
    try:
        read.consumer_config()
    except ValueError as e:
        raise RiverlogOptionError(f"consumer option: {e}") from None
    return read


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """A write's options: the gateways, a default topic, and the producer's Kafka keys."""

    bootstrap: str
    topic: str | None
    producer_conf: Mapping[str, str]
    transactional: bool = False  # riverlog.transactional: exactly-once streaming (txn_writer)
    transactional_id_prefix: str = "riverlog-spark"

    def producer_config(self) -> dict[str, str]:
        return {**self.producer_conf, "bootstrap.servers": self.bootstrap}

    def admin_config(self) -> dict[str, str]:
        """The producer's connection and credentials, for the admin calls of a write."""
        shared = ("security.", "sasl.", "ssl.", "client.id")
        conf = {k: v for k, v in self.producer_conf.items() if k.startswith(shared)}
        return {**conf, "bootstrap.servers": self.bootstrap}


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    options = _lower(raw)
    transactional = options.get(TRANSACTIONAL, "false").strip().lower()
    if transactional not in ("true", "false"):
        raise RiverlogOptionError(
            f"option {TRANSACTIONAL!r} must be true or false, not {transactional!r}"
        )
    producer_conf = _client_conf(options, PRODUCER_PREFIX)
    if transactional == "true" and "transactional.id" in producer_conf:
        raise RiverlogOptionError(
            f"with {TRANSACTIONAL} the sink names its transactional ids itself (one per query "
            f"and partition, after {TRANSACTIONAL_ID_PREFIX!r}); do not set transactional.id"
        )
    write = WriteOptions(
        bootstrap=bootstrap(options),
        topic=options.get("topic") or None,
        producer_conf=producer_conf,
        transactional=transactional == "true",
        transactional_id_prefix=options.get(TRANSACTIONAL_ID_PREFIX) or "riverlog-spark",
    )
    try:
        ProducerConfig.from_kafka(write.producer_config())
    except ValueError as e:
        raise RiverlogOptionError(f"producer option: {e}") from None
    return write
