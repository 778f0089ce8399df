"""Consumer groups: the list (state, protocol, members), and one group's members with their
assignments, lag per partition (refreshed in place by htmx) and total lag over time."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from riverlog.client import AdminClient

from . import reads
from .sampler import LAG
from .series import total_lag
from .sessions import Session
from .web import page, render


def _list(admin: AdminClient) -> list[dict[str, Any]]:
    listed = admin.list_groups()
    described = admin.describe_groups([g.group_id for g in listed]) if listed else {}
    rows = []
    for g in listed:
        d = described.get(g.group_id)
        rows.append(
            {
                "group_id": g.group_id,
                "state": d.state if d else g.state,
                "protocol_type": g.protocol_type,
                "protocol": d.protocol if d else "",
                "members": len(d.members) if d else 0,
            }
        )
    return rows


@page
async def groups(request: Request, session: Session) -> Response:
    rows = await run_in_threadpool(_list, session.admin)
    return render(request, session, "groups.html", {"rows": rows})


def _lag_context(admin: AdminClient, group_id: str) -> dict[str, Any]:
    lags = reads.group_lag(admin, group_id)
    return {"group_id": group_id, "lags": lags, "total_lag": total_lag(p.lag for p in lags)}


@page
async def group(request: Request, session: Session) -> Response:
    group_id = request.path_params["group_id"]

    def read() -> dict[str, Any]:
        description = session.admin.describe_groups([group_id])[group_id]
        return {"group": description, **_lag_context(session.admin, group_id)}

    context = await run_in_threadpool(read)
    session.sampler.watch((LAG, group_id))
    return render(request, session, "group.html", context)


@page
async def lag_fragment(request: Request, session: Session) -> Response:
    group_id = request.path_params["group_id"]
    context = await run_in_threadpool(_lag_context, session.admin, group_id)
    return render(request, session, "_lag.html", context)


@page
async def total_lag_fragment(request: Request, session: Session) -> Response:
    """The group's total lag alone, which the groups list loads per row (htmx, on load) so the
    list itself costs one call whatever the number of groups."""
    group_id = request.path_params["group_id"]
    lags = await run_in_threadpool(reads.group_lag, session.admin, group_id)
    return PlainTextResponse(str(total_lag(p.lag for p in lags)))


@page
async def lag_json(request: Request, session: Session) -> Response:
    """The group's total lag as sampled: {"points": [[ms, lag], ...], "error": ""}."""
    key = (LAG, request.path_params["group_id"])
    points = session.sampler.points(key)
    return JSONResponse(
        {
            "points": [[round(p.t * 1000), p.value] for p in points],
            "error": session.sampler.error(key),
        }
    )


def routes() -> list[BaseRoute]:
    return [
        Route("/groups", groups),
        # group ids may hold "/" (Kafka allows it): the suffixed routes come first
        Route("/groups/{group_id:path}/lag.json", lag_json),
        Route("/groups/{group_id:path}/lag", lag_fragment),
        Route("/groups/{group_id:path}/total-lag", total_lag_fragment),
        Route("/groups/{group_id:path}", group),
    ]
