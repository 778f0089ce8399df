"""Topics: the list (partitions, replication, records, under-replicated partitions), one
topic's partitions (leader, replicas, ISR, offsets, the leader's size on disk and in the remote
tier, issue 16), its configs and throughput graph, and the forms that create, alter (configs,
partition count) and delete topics."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from riverlog.client import AdminClient, NewTopic, ReplicaInfo, TopicDescription, TopicPartition
from riverlog.common.errors import ErrorCode, RiverlogError

from . import reads
from .forms import config_lines, whole_number
from .sampler import ENDS
from .sessions import Session
from .web import back, form_action, page, render, url


def _list(admin: AdminClient, include_internal: bool) -> list[dict[str, Any]]:
    topics = admin.describe_topics(include_internal=include_internal)
    tps = [TopicPartition(t.name, p.partition) for t in topics.values() for p in t.partitions]
    starts = admin.list_offsets(dict.fromkeys(tps, reads.EARLIEST)) if tps else {}
    ends = reads.end_offsets(admin, tps)
    rows = []
    for name, t in sorted(topics.items()):
        records = 0
        for p in t.partitions:
            tp = TopicPartition(name, p.partition)
            start = starts.get(tp)
            records += max(ends.get(tp, 0) - (start.offset if start else 0), 0)
        rows.append(
            {
                "name": name,
                "internal": t.internal,
                "partitions": len(t.partitions),
                "replication": len(t.partitions[0].replicas) if t.partitions else 0,
                "under_replicated": sum(len(p.isr) < len(p.replicas) for p in t.partitions),
                "offline": sum(p.leader < 0 for p in t.partitions),
                "records": records,
            }
        )
    return rows


@page
async def topics(request: Request, session: Session) -> Response:
    internal = request.query_params.get("internal") == "1"
    rows = await run_in_threadpool(_list, session.admin, internal)
    return render(request, session, "topics.html", {"rows": rows, "internal": internal})


async def create_topic(request: Request, session: Session) -> Response:
    form = await request.form()
    name = str(form.get("name", "")).strip()
    if not name:
        raise RiverlogError("a topic needs a name", ErrorCode.INVALID_TOPIC_EXCEPTION)
    partitions = whole_number(
        "partitions",
        str(form.get("partitions", "")),
        lo=1,
        default=-1,
        code=ErrorCode.INVALID_PARTITIONS,
    )
    replication = whole_number(
        "replication factor",
        str(form.get("replication_factor", "")),
        lo=1,
        default=-1,
        code=ErrorCode.INVALID_REPLICATION_FACTOR,
    )
    configs = config_lines(str(form.get("configs", "")))
    new = NewTopic(name, partitions, replication, configs)
    await run_in_threadpool(session.admin.create_topics, [new])
    session.flash("ok", f"topic {name!r} created")
    return back(url("topics", name))


def _sizes(admin: AdminClient, topic: TopicDescription) -> dict[int, ReplicaInfo]:
    """Partition → its leader's replica (DescribeLogDirs; decision 0040), where it answered."""
    logs = admin.describe_log_dirs([topic.name], raise_on_error=False)
    out: dict[int, ReplicaInfo] = {}
    for p in topic.partitions:
        info = logs.replicas(TopicPartition(topic.name, p.partition)).get(p.leader)
        if info is not None:
            out[p.partition] = info
    return out


def _detail(admin: AdminClient, name: str) -> dict[str, Any]:
    """The topic's page; its configs need DESCRIBE_CONFIGS and its sizes DESCRIBE on the
    cluster, which a reader may lack (READ implies only DESCRIBE on the topic): then the page
    says so in their place instead of failing whole."""
    description = admin.describe_topics([name])[name]
    offsets = reads.topic_offsets(admin, name, len(description.partitions))
    configs_error = sizes_error = ""
    try:
        configs = admin.describe_configs([name])[name]
    except RiverlogError as e:
        configs, configs_error = {}, f"{e.code.name}: {e.message}"
    try:
        sizes = _sizes(admin, description)
    except RiverlogError as e:
        sizes, sizes_error = {}, f"{e.code.name}: {e.message}"
    local = sum(i.size_bytes for i in sizes.values())
    remote = sum(i.remote_size_bytes for i in sizes.values())
    return {
        "topic": description,
        "offsets": offsets,
        "configs": sorted(configs.values(), key=lambda c: (c.is_default, c.name)),
        "configs_error": configs_error,
        "records": sum(o.records for o in offsets.values()),
        "sizes": sizes,
        "sizes_error": sizes_error,
        "size_total": {"total": local + remote, "local": local, "remote": remote},
    }


@page
async def topic(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    context = await run_in_threadpool(_detail, session.admin, name)
    session.sampler.watch((ENDS, name))
    return render(request, session, "topic.html", {"name": name, **context})


async def alter_configs(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    changes: dict[str, object] = dict(config_lines(str(form.get("set", ""))))
    for key in str(form.get("delete", "")).replace(",", " ").split():
        changes[key] = None
    if not changes:
        raise RiverlogError("no config to set or delete", ErrorCode.INVALID_CONFIG)
    await run_in_threadpool(session.admin.alter_configs, {name: changes})
    session.flash("ok", f"configs of {name!r} changed: {', '.join(sorted(changes))}")
    return back(url("topics", name))


async def add_partitions(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    total = whole_number(
        "partition count", str(form.get("count", "")), lo=1, code=ErrorCode.INVALID_PARTITIONS
    )
    await run_in_threadpool(session.admin.create_partitions, {name: total})
    session.flash("ok", f"{name!r} now has {total} partitions")
    return back(url("topics", name))


async def delete_topic(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    if str(form.get("confirm", "")) != name:
        raise RiverlogError(
            f"type the topic's name ({name}) to confirm its deletion", ErrorCode.INVALID_REQUEST
        )
    await run_in_threadpool(session.admin.delete_topics, [name])
    session.flash("ok", f"topic {name!r} deleted")
    return back("/topics")


@page
async def throughput(request: Request, session: Session) -> Response:
    """The topic's records per second, as sampled: {"points": [[ms, rate], ...]}."""
    key = (ENDS, request.path_params["name"])
    points = session.sampler.points(key)
    return JSONResponse(
        {
            "points": [[round(p.t * 1000), round(p.value, 3)] for p in points],
            "error": session.sampler.error(key),
        }
    )


def routes() -> list[BaseRoute]:
    return [
        Route("/topics", topics, methods=["GET"]),
        Route("/topics", page(form_action(create_topic, "/topics")), methods=["POST"]),
        Route("/topics/{name}/throughput.json", throughput),
        Route(
            "/topics/{name}/configs",
            page(form_action(alter_configs, "/topics/{name}")),
            methods=["POST"],
        ),
        Route(
            "/topics/{name}/partitions",
            page(form_action(add_partitions, "/topics/{name}")),
            methods=["POST"],
        ),
        Route(
            "/topics/{name}/delete",
            page(form_action(delete_topic, "/topics/{name}")),
            methods=["POST"],
        ),
        Route("/topics/{name}", topic),
    ]
