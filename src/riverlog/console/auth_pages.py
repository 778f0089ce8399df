"""Sign in and out. The form takes a user name and password (the SDK's sasl.username /
sasl.password) or a token (sasl.oauthbearer.token); left empty, the session is ANONYMOUS,
which the gateway accepts only where `allow.anonymous` is on."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from riverlog.common.errors import RiverlogError

from .web import COOKIE, back, page, render, safe_next, status_of, store_of


async def login_form(request: Request) -> Response:
    return render(
        request, None, "login.html", {"next": safe_next(request.query_params.get("next"))}
    )


async def login(request: Request) -> Response:
    form = await request.form()
    user, password, token = (str(form.get(k, "")) for k in ("username", "password", "token"))
    target = safe_next(str(form.get("next", "")))
    store_of(request).logout(request.cookies.get(COOKIE))  # a new sign-in ends the old session
    try:
        session = await run_in_threadpool(store_of(request).login, user.strip(), password, token)
    except RiverlogError as e:
        context = {"next": target, "username": user, "error": f"{e.code.name}: {e.message}"}
        return render(request, None, "login.html", context, status_of(e))
    response = back(target)
    response.set_cookie(COOKIE, session.sid, httponly=True, samesite="strict", path="/")
    return response


async def logout(request: Request) -> Response:
    store_of(request).logout(request.cookies.get(COOKIE))
    response = back("/login")
    response.delete_cookie(COOKIE, path="/")
    return response


@page
async def home(request: Request, session: object) -> Response:
    return back("/cluster")


def routes() -> list[BaseRoute]:
    return [
        Route("/", home),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
