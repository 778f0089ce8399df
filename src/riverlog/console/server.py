"""Serve the console with uvicorn until SIGINT or SIGTERM (uvicorn's graceful shutdown runs the
app's lifespan, which closes every session's client and sampler)."""

from __future__ import annotations

import uvicorn

from .app import create_app
from .sessions import SessionStore


def serve(store: SessionStore, host: str, port: int, log_level: str = "info") -> None:
    config = uvicorn.Config(
        create_app(store),
        host=host,
        port=port,
        log_level=log_level,
        access_log=log_level == "debug",
        proxy_headers=False,
        server_header=False,
    )
    uvicorn.Server(config).run()
