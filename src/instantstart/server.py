"""Starting the HTTP server (and, with --twin, the digital twin as a child process)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import uvicorn

from instantstart.api.app import create_app
from instantstart.logs import configure
from instantstart.settings import Settings
from instantstart.twin_process import apply_env, start_twin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TwinOptions:
    """How `serve --twin` starts the twin: its port (0: a free one) and clock scale (None: the twin's default)."""

    port: int = 0
    clock_scale: float | None = None


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn serves `settings`: TLS when a certificate and key are set; X-Forwarded-* believed only from
    `trusted_proxies` (uvicorn's default trusts 127.0.0.1, so any local process could claim https or another
    client address, e.g. to escape the sign-in failure limit)."""
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise ValueError("INSTANTSTART_TLS_CERT_FILE and INSTANTSTART_TLS_KEY_FILE go together: set both or neither")
    options: dict[str, Any] = {"proxy_headers": bool(settings.trusted_proxies)}
    if settings.trusted_proxies:
        options["forwarded_allow_ips"] = list(settings.trusted_proxies)
    if settings.tls_cert_file and settings.tls_key_file:
        options["ssl_certfile"] = str(settings.tls_cert_file)
        options["ssl_keyfile"] = str(settings.tls_key_file)
    return options


def run_server(
    settings: Settings, *, host: str | None = None, port: int | None = None, twin: TwinOptions | None = None
) -> None:
    """Serve until interrupted (with the digital twin as AWS when `twin` is given)."""
    updates: dict[str, object] = {}
    if host:
        updates["host"] = host
    if port:
        updates["port"] = port
    settings = settings.model_copy(update=updates)
    configure(settings.log_level, settings.log_json)
    child = None
    if twin is not None:
        child = start_twin(port=twin.port, clock_scale=twin.clock_scale)
        apply_env(child)
        settings = settings.model_copy(
            update={
                "aws_endpoint_url": child.endpoint_url,
                "aws_region": child.env.get("AWS_REGION", settings.aws_region),
                # The twin's local chart repository, so helm-installed dependencies work offline.
                "helm_repository_url": settings.helm_repository_url or child.info.get("chart_repo_url"),
                # The twin's Hugging Face hub stand-in, so model look-ups and downloads work offline.
                "hf_endpoint": settings.hf_endpoint or child.info.get("hub_url"),
            }
        )
        log.info("digital twin started", extra={"endpoint": child.endpoint_url})
    try:
        # Uvicorn re-raises SIGTERM after its graceful shutdown, so the twin is stopped from the lifespan.
        app = create_app(settings, on_shutdown=(child.stop,) if child is not None else (), warm_aws=True)
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=10,
            **uvicorn_options(settings),
        )
    finally:
        if child is not None:
            child.stop()
