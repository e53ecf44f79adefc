"""Starting the HTTP server (and, with --twin, the digital twin as a child process)."""

from __future__ import annotations

import logging

import uvicorn

from instantstart.api.app import create_app
from instantstart.logs import configure
from instantstart.settings import Settings

log = logging.getLogger(__name__)


def run_server(settings: Settings, *, host: str | None = None, port: int | None = None, twin: bool = False) -> None:
    """Serve until interrupted."""
    updates: dict[str, object] = {}
    if host:
        updates["host"] = host
    if port:
        updates["port"] = port
    settings = settings.model_copy(update=updates)
    configure(settings.log_level, settings.log_json)
    if twin:
        log.warning("--twin: the digital twin is not available in this build; serving without a cloud backend")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False,
                lifespan="on", timeout_graceful_shutdown=10)
