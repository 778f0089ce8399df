"""Helpers of the Spark tests: produce known records through the SDK, and collect a
DataFrame of the `riverlog` schema as plain, comparable dicts."""

from __future__ import annotations

from typing import Any

from riverlog.client import Producer


def produce(
    bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any
) -> list[dict[str, Any]]:
    """Send `records` ({value, key?, partition?, headers?, timestamp_ms?}) and return them with
    the topic, partition and offset each got."""
    out = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf}) as producer:
        futures = [
            producer.send(
                topic,
                r["value"],
                r.get("key"),
                r.get("headers"),
                r.get("partition"),
                r.get("timestamp_ms"),
            )
            for r in records
        ]
        producer.flush()
        for r, future in zip(records, futures, strict=True):
            meta = future.result(timeout=30)
            out.append({**r, "topic": topic, "partition": meta.partition, "offset": meta.offset})
    return out


def rows_as_dicts(df: Any) -> list[dict[str, Any]]:
    """Collected rows as dicts (headers as (key, value) tuples), sorted by partition, offset."""
    rows = []
    for row in df.collect():
        d = row.asDict()
        if d.get("headers") is not None:
            d["headers"] = [(h["key"], bytes(h["value"])) for h in d["headers"]]
        for name in ("key", "value"):
            if d.get(name) is not None:
                d[name] = bytes(d[name])
        rows.append(d)
    return sorted(rows, key=lambda d: (d.get("partition", 0), d.get("offset", 0)))
