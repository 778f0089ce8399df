"""What every page handler shares: the login gate, rendering, redirects and errors.

Every page handler takes the request and the signed-in `Session`; `page()` wraps it: no
session sends the browser to /login (an htmx request gets HX-Redirect), a RiverlogError from
the cluster renders the error page with its Kafka code (403 for an authorization failure, 404
for an unknown topic or group). SDK calls block, so handlers run them in Starlette's thread
pool. Forms post and redirect (303) back with a flash message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlparse

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from riverlog.common.errors import ErrorCode, RiverlogError

from .sessions import Session, SessionStore

HERE = Path(__file__).resolve().parent
COOKIE: Final = "riverlog_console"
templates = Jinja2Templates(directory=HERE / "templates")


def number(value: float) -> str:
    """A quota or rate for people: 1,048,576 rather than 1.04858e+06."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def size(value: int | None) -> str:
    """Bytes for people, in binary units as `du -h`: 0 B, 812 B, 4.2 KiB, 1.5 GiB."""
    if value is None:
        return "?"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


templates.env.filters["number"] = number
templates.env.filters["size"] = size

Handler = Callable[[Request, Session], Awaitable[Response]]

PAGE_HEADERS: Final = {
    # pages show what one user may see: no shared caches, no framing of the forms, scripts
    # only from the console itself (the vendored files; no inline script anywhere)
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

NOT_FOUND: Final = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND})


def status_of(error: RiverlogError) -> int:
    """The HTTP status a cluster's refusal is shown with."""
    if error.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        return 401
    if error.code.name.endswith("_AUTHORIZATION_FAILED"):
        return 403
    if error.code in NOT_FOUND:
        return 404
    return 503 if error.retriable else 400


def store_of(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.store
    return store


def has_acls(session: Session) -> bool:
    """Whether this SDK can describe ACLs (feature-detected, so the page appears once the
    AdminClient has `describe_acls`)."""
    return callable(getattr(session.admin, "describe_acls", None))


def render(
    request: Request,
    session: Session | None,
    name: str,
    context: dict[str, Any] | None = None,
    status_code: int = 200,
) -> Response:
    base: dict[str, Any] = {
        "session": session,
        "principal": session.principal if session else "",
        "flashes": session.take_flashes() if session and not name.startswith("_") else [],
        "acls_enabled": has_acls(session) if session else False,
        "refresh_s": max(2, round(store_of(request).sample_interval_s)),
        "path": request.url.path,
    }
    response = templates.TemplateResponse(request, name, {**base, **(context or {})}, status_code)
    response.headers.update(PAGE_HEADERS)
    return response


def back(to: str) -> RedirectResponse:
    return RedirectResponse(to, status_code=303)


def url(*parts: str) -> str:
    """A path of quoted segments: url("topics", name) is /topics/<name, quoted>."""
    return "/" + "/".join(quote(p, safe="") for p in parts)


def safe_next(target: str | None) -> str:
    """A same-site path to return to after login, never another site."""
    if not target:
        return "/"
    parsed = urlparse(target)
    if parsed.scheme or parsed.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        session = store_of(request).get(request.cookies.get(COOKIE))
        if session is None:
            target = "/login?next=" + quote(request.url.path)
            if request.headers.get("HX-Request"):
                return Response(status_code=401, headers={"HX-Redirect": target})
            return back(target)
        try:
            return await handler(request, session)
        except RiverlogError as e:
            return render(request, session, "error.html", {"error": e}, status_of(e))

    endpoint.__name__ = handler.__name__
    return endpoint


def form_action(handler: Handler, fallback: str) -> Handler:
    """A form post: a RiverlogError is flashed and the browser goes back to `fallback`
    (formatted with the path parameters) instead of seeing an error page."""

    async def endpoint(request: Request, session: Session) -> Response:
        try:
            return await handler(request, session)
        except RiverlogError as e:
            session.flash("error", f"{e.code.name}: {e.message}")
            params = {k: quote(str(v), safe="") for k, v in request.path_params.items()}
            return back(fallback.format(**params))

    endpoint.__name__ = handler.__name__
    return endpoint
