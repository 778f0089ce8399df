"""The cluster page (nodes by role and rack, the controller and its epoch, health), client
quotas, users, and ACLs (listed, added and removed; only where the SDK has `describe_acls`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from riverlog.common.acl.model import AclBinding, AclBindingFilter
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.entity import DEFAULT, QUOTA_KEYS, QuotaEntity

from .forms import (
    ACL_OPERATIONS,
    ACL_PATTERN_TYPES,
    ACL_PERMISSIONS,
    ACL_RESOURCE_TYPES,
    acl_binding,
    acl_rows,
    quota_value,
)
from .sessions import Session
from .web import back, form_action, has_acls, number, page, render

ROLE_ORDER = ("metadata", "storage", "coordinator", "quota", "gateway")


@page
async def cluster(request: Request, session: Session) -> Response:
    described = await run_in_threadpool(session.admin.describe_cluster)
    by_role: dict[str, list[Any]] = defaultdict(list)
    for node in sorted(described.nodes, key=lambda n: (n.kind, n.node_id)):
        by_role[node.kind].append(node)
    roles = sorted(by_role, key=lambda r: (ROLE_ORDER.index(r) if r in ROLE_ORDER else 99, r))
    racks = sorted({n.rack for n in described.nodes if n.rack})
    problems = []
    if described.controller_id < 0:
        problems.append("no active controller")
    if described.offline_partitions:
        problems.append(f"{described.offline_partitions} offline partition(s)")
    if described.under_replicated_partitions:
        problems.append(f"{described.under_replicated_partitions} under-replicated partition(s)")
    context = {
        "cluster": described,
        "roles": [(r, by_role[r]) for r in roles],
        "racks": racks,
        "problems": problems,
    }
    return render(request, session, "cluster.html", context)


def _entity_name(name: str | None) -> str:
    if name is None:
        return ""
    return "<default>" if name == DEFAULT else name


@page
async def quotas(request: Request, session: Session) -> Response:
    found = await run_in_threadpool(session.admin.describe_client_quotas)
    rows = [
        {"user": _entity_name(e.user), "client_id": _entity_name(e.client_id), "values": values}
        for e, values in sorted(
            found.items(), key=lambda kv: (str(kv[0].user), str(kv[0].client_id))
        )
    ]
    return render(request, session, "quotas.html", {"rows": rows, "keys": QUOTA_KEYS})


def _entity_part(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    return DEFAULT if text == "<default>" else text


async def set_quota(request: Request, session: Session) -> Response:
    form = await request.form()
    key = str(form.get("key", ""))
    if key not in QUOTA_KEYS:
        raise RiverlogError(f"unknown quota key {key!r}", ErrorCode.INVALID_CONFIG)
    value = quota_value(str(form.get("value", "")))
    entity = QuotaEntity(
        _entity_part(str(form.get("user", ""))), _entity_part(str(form.get("client_id", "")))
    )
    await run_in_threadpool(session.admin.alter_client_quotas, [(entity, {key: value})])
    session.flash("ok", f"{key} {'removed' if value is None else f'set to {number(value)}'}")
    return back("/quotas")


@page
async def users(request: Request, session: Session) -> Response:
    names = await run_in_threadpool(session.admin.list_users)
    return render(request, session, "users.html", {"users": sorted(names)})


async def add_user(request: Request, session: Session) -> Response:
    form = await request.form()
    name, password = str(form.get("name", "")).strip(), str(form.get("password", ""))
    if not name or not password:
        raise RiverlogError("a user needs a name and a password", ErrorCode.INVALID_REQUEST)
    await run_in_threadpool(session.admin.upsert_user, name, password)
    session.flash("ok", f"user {name!r} saved")
    return back("/users")


async def delete_user(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    await run_in_threadpool(session.admin.delete_user, name)
    session.flash("ok", f"user {name!r} deleted")
    return back("/users")


@page
async def acls(request: Request, session: Session) -> Response:
    if not has_acls(session):
        raise RiverlogError(
            "this Riverlog's SDK has no ACL support (AdminClient.describe_acls)",
            ErrorCode.UNSUPPORTED_VERSION,
        )
    bindings = await run_in_threadpool(session.admin.describe_acls)
    context = {
        "rows": acl_rows(bindings),
        "resource_types": ACL_RESOURCE_TYPES,
        "pattern_types": ACL_PATTERN_TYPES,
        "operations": ACL_OPERATIONS,
        "permissions": ACL_PERMISSIONS,
    }
    return render(request, session, "acls.html", context)


def _binding_of(form: Any) -> AclBinding:
    def field(name: str) -> str:
        return str(form.get(name, ""))

    return acl_binding(
        field("principal"),
        field("host"),
        field("permission"),
        field("operation"),
        field("resource_type"),
        field("pattern_type"),
        field("resource"),
    )


async def add_acl(request: Request, session: Session) -> Response:
    binding = _binding_of(await request.form())
    await run_in_threadpool(session.admin.create_acls, [binding])
    session.flash("ok", f"added {binding}")
    return back("/acls")


async def remove_acl(request: Request, session: Session) -> Response:
    """Delete exactly the binding of the row (a filter naming every field)."""
    binding = _binding_of(await request.form())
    p, e = binding.pattern, binding.entry
    exact = AclBindingFilter(
        p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission
    )
    [deleted] = await run_in_threadpool(session.admin.delete_acls, [exact])
    session.flash("ok", f"removed {binding}" if deleted else f"no such binding: {binding}")
    return back("/acls")


def routes() -> list[BaseRoute]:
    return [
        Route("/cluster", cluster),
        Route("/quotas", quotas, methods=["GET"]),
        Route("/quotas", page(form_action(set_quota, "/quotas")), methods=["POST"]),
        Route("/users", users, methods=["GET"]),
        Route("/users", page(form_action(add_user, "/users")), methods=["POST"]),
        Route("/users/{name}/delete", page(form_action(delete_user, "/users")), methods=["POST"]),
        Route("/acls", acls, methods=["GET"]),
        Route("/acls", page(form_action(add_acl, "/acls")), methods=["POST"]),
        Route("/acls/delete", page(form_action(remove_acl, "/acls")), methods=["POST"]),
    ]
