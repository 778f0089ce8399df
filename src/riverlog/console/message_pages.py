"""The message browser: one partition's records from an offset, from a time, or the newest,
with keys, values and headers decoded as text, JSON or hex (`decode.py`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from riverlog.client import TopicPartition
from riverlog.common.errors import ErrorCode, RiverlogError

from .browse import MAX_LIMIT, read_partition
from .decode import FORMATS, decode
from .forms import timestamp_ms, whole_number
from .sessions import Session
from .web import page, render

MODES = ("newest", "offset", "timestamp")


def _row(record: Any, fmt: str) -> dict[str, Any]:
    moment = datetime.fromtimestamp(record.timestamp / 1000, UTC)
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "key": decode(record.key, fmt),
        "value": decode(record.value, fmt),
        "headers": [(k, decode(v, fmt)) for k, v in record.headers],
    }


@page
async def messages(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    q = request.query_params
    description = (await run_in_threadpool(session.admin.describe_topics, [name]))[name]
    count = len(description.partitions)
    fmt = q.get("format", "auto")
    mode = q.get("mode", "newest")
    if fmt not in FORMATS:
        raise RiverlogError(
            f"format must be one of {', '.join(FORMATS)}", ErrorCode.INVALID_REQUEST
        )
    if mode not in MODES:
        raise RiverlogError(f"mode must be one of {', '.join(MODES)}", ErrorCode.INVALID_REQUEST)
    partition = whole_number("partition", q.get("partition", ""), lo=0, default=0)
    if partition >= count:
        raise RiverlogError(
            f"{name} has partitions 0 to {count - 1}, not {partition}",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    limit = min(whole_number("limit", q.get("limit", ""), lo=1, default=50), MAX_LIMIT)
    offset = timestamp = None
    if mode == "offset":
        offset = whole_number("offset", q.get("offset", ""), lo=0, default=0)
    elif mode == "timestamp":
        timestamp = timestamp_ms(q.get("timestamp", ""))
    result = await run_in_threadpool(
        lambda: read_partition(
            session.conf,
            TopicPartition(name, partition),
            offset=offset,
            timestamp_ms=timestamp,
            limit=limit,
        )
    )
    context = {
        "name": name,
        "partitions": range(count),
        "partition": partition,
        "mode": mode,
        "offset": q.get("offset", ""),
        "timestamp": q.get("timestamp", ""),
        "limit": limit,
        "format": fmt,
        "formats": FORMATS,
        "page": result,
        "rows": [_row(r, fmt) for r in result.records],
    }
    return render(request, session, "messages.html", context)


def routes() -> list[BaseRoute]:
    return [Route("/topics/{name}/messages", messages)]
