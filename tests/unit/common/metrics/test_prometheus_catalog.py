"""The metric catalog: Prometheus-legal unique names, each with its Kafka name in HELP, and the
served-sample names mapped back to their family."""

from __future__ import annotations

import re

from riverlog.common.metrics.catalog import CATALOG, Kind, family_of

NAME = re.compile(r"^riverlog_[a-z0-9_]+$")
LABEL = re.compile(r"^[a-z_][a-z0-9_]*$")
SERVICES = {"metadata", "storage", "coordinator", "quota", "gateway"}


def test_names_labels_and_help() -> None:
    for name, spec in CATALOG.items():
        assert NAME.match(name) and spec.name == name
        assert all(LABEL.match(label) for label in spec.labels)
        assert spec.help.endswith(f"[{spec.kafka}]") and spec.kafka
        assert set(spec.served_by) <= SERVICES and spec.served_by


def test_no_name_ends_in_a_suffix_prometheus_reserves() -> None:
    # promtool check metrics: _count/_sum/_bucket belong to histograms and summaries
    reserved = ("_count", "_sum", "_bucket", "_total", "_created", "_info")
    for name in CATALOG:
        assert not name.endswith(reserved), name


def test_every_service_serves_something() -> None:
    assert {s for spec in CATALOG.values() for s in spec.served_by} == SERVICES


def test_family_of_served_samples() -> None:
    assert family_of("riverlog_topic_bytes_in_total") == "riverlog_topic_bytes_in"
    assert family_of("riverlog_topic_bytes_in") == "riverlog_topic_bytes_in"
    assert family_of("riverlog_request_duration_seconds_bucket") == (
        "riverlog_request_duration_seconds"
    )
    assert family_of("riverlog_consumer_group_lag") == "riverlog_consumer_group_lag"
    assert family_of("riverlog_consumer_group_lag_total") is None  # a gauge has no _total
    assert family_of("process_cpu_seconds_total") is None
    assert CATALOG["riverlog_request_duration_seconds"].kind is Kind.HISTOGRAM
