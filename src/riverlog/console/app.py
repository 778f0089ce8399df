"""The console's Starlette application: the routes of every page module, the static files
(vendored htmx, Chart.js and Pico CSS) and the session store closed at shutdown."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import auth_pages, cluster_pages, group_pages, message_pages, topic_pages
from .sessions import SessionStore
from .web import HERE


async def healthz(request: Request) -> Response:
    """Liveness for deploy/ (no session needed, no cluster call)."""
    return PlainTextResponse("ok")


def create_app(store: SessionStore) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            store.close()

    routes = [
        Route("/healthz", healthz),
        *auth_pages.routes(),
        *cluster_pages.routes(),
        *message_pages.routes(),
        *topic_pages.routes(),
        *group_pages.routes(),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.store = store
    return app
