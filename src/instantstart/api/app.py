"""The application: FastAPI REST routes, /mcp, /healthz, /metrics, auth, request ids, lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from instantstart import __version__
from instantstart.api.gate import Gate, error_response
from instantstart.api.metrics import Metrics
from instantstart.api.openapi import build_openapi
from instantstart.api.rest import add_routes, fast_reads
from instantstart.api.ws import EventHub, add_ws_route
from instantstart.api.ws_limits import SocketSlots
from instantstart.api.ws_logs import add_log_ws_route
from instantstart.auth import Authenticator, ensure_token
from instantstart.aws.clients import AwsClients
from instantstart.catalog import CATALOG, Catalog
from instantstart.catalog.routes import API_PREFIX
from instantstart.context import AppContext
from instantstart.describe_cache import Clock, DbReadCache, DescribeCache
from instantstart.errors import InstantStartError, InvalidInput, NotFound
from instantstart.kube.client import KubeClients
from instantstart.kube.informers import Informers
from instantstart.logs import register_server_secret, request_id_var
from instantstart.mcp.http import session_manager
from instantstart.operations.kinds import KINDS
from instantstart.operations.runner import Runner
from instantstart.operations.store import OperationStore
from instantstart.principal import BOOTSTRAP_USER
from instantstart.services import load_all
from instantstart.services.alerts import evaluator as alert_evaluator
from instantstart.services.base.watch.timeline import attach as attach_timeline
from instantstart.services.monitoring import feeds
from instantstart.settings import Settings
from instantstart.sso.signin import sso_gate
from instantstart.store.access import ensure_user
from instantstart.store.db import Database
from instantstart.validation import known_regions
from instantstart.web.oidc import add_oidc_routes
from instantstart.web.routes import add_web_routes
from instantstart.web.sessions import SessionStore

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)



def build_context(settings: Settings, clock: Clock = time.monotonic) -> AppContext:
    """The process-wide context: database, operation store and runner, AWS and Kubernetes clients, caches (whose
    intervals `clock` measures)."""
    db = Database(settings.resolved_database_url)
    runner: Runner[AppContext] = Runner(settings, OperationStore(db, KINDS), KINDS)
    aws = AwsClients(settings)
    return AppContext(
        settings=settings,
        db=db,
        runner=runner,
        aws=aws,
        kube=KubeClients(aws),
        cache=DescribeCache(settings.status_cache_seconds, clock=clock),
        informers=Informers(settings.watch_idle_seconds, clock),
        db_reads=DbReadCache(clock=clock),
    )


def _token(settings: Settings) -> str:
    token, created = ensure_token(settings)
    register_server_secret(token)
    if created:
        # Shown once, on the terminal, never through the log pipeline.
        print(f"API token created in {settings.data_dir / 'api-token'} (mode 0600): {token}", flush=True)
    return token


def _allowed_hosts(settings: Settings) -> list[str]:
    """Host headers the MCP endpoint accepts (DNS-rebinding protection)."""
    return [
        f"{settings.host}:{settings.port}",
        f"127.0.0.1:{settings.port}",
        f"localhost:{settings.port}",
        "127.0.0.1:*",
        "localhost:*",
    ]


def _add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as the one JSON error body (see `error_response`)."""

    @app.exception_handler(InstantStartError)
    async def _known(request: Request, exc: InstantStartError) -> Response:
        return error_response(exc, request_id_var.get())

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        return error_response(InvalidInput(f"Invalid input: {exc.errors()}"), request_id_var.get())

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> Response:
        return error_response(
            NotFound(f"No route {request.method} {request.url.path}.", hint="See /api/v1/openapi.json for the routes."),
            request_id_var.get(),
        )

    @app.exception_handler(405)
    async def _not_allowed(request: Request, exc: Exception) -> Response:
        err = InvalidInput(f"Method {request.method} is not allowed on {request.url.path}.")
        response = error_response(err, request_id_var.get())
        response.status_code = 405
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return error_response(InstantStartError("Internal error."), request_id_var.get())


# Generation-0 collections once per 50,000 net allocations instead of 700: request handling and the watches
# allocate many short-lived objects and few cycles, so the default threshold ran the collector on the event loop
# often for little.
GC_THRESHOLDS = (50_000, 10, 10)


def freeze_startup_heap() -> None:
    """Move every object alive once started (modules, models, the catalog: ~200k objects) out of the cyclic
    collector's reach and space collections out (`GC_THRESHOLDS`). Otherwise each full collection walks them all
    on the event loop: 50-1000 ms with /healthz waiting (the hostile-input test's slow poll); after the freeze a
    full collection takes a few ms."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _add_public_routes(app: FastAPI, openapi: dict[str, Any], metrics: Metrics) -> None:
    """/healthz, the OpenAPI document and /metrics."""

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get(API_PREFIX + "/openapi.json", include_in_schema=False)
    async def openapi_json() -> dict[str, Any]:
        return openapi

    @app.get("/metrics", include_in_schema=False)
    async def metrics_endpoint() -> Response:
        body = await to_thread.run_sync(metrics.render)
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")


def _cors(settings: Settings, inner: ASGIApp) -> ASGIApp | None:
    """CORS for the listed origins (none by default; a wildcard is refused)."""
    if not settings.allowed_origins:
        return None
    if "*" in settings.allowed_origins:
        raise ValueError("INSTANTSTART_ALLOWED_ORIGINS must list origins; a wildcard is refused")
    return CORSMiddleware(
        inner,
        allow_origins=settings.allowed_origins,
        allow_credentials=True,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
    )


def _lifespan(
    context: AppContext,
    hub: EventHub,
    mcp_manager: StreamableHTTPSessionManager,
    metrics: Metrics,
    settings: Settings,
    on_shutdown: tuple[Callable[[], None], ...],
    *,
    warm_aws: bool,
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The server's start (migrations, runner, feeds, alerts, sockets, MCP) and its stop, in reverse."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await to_thread.run_sync(context.db.migrate)
        await to_thread.run_sync(ensure_user, context.db, BOOTSTRAP_USER, "admin")  # the token file's user
        context.runner.start(context)
        await feeds.start_known(context)
        alert_evaluator.start(context)
        hub.start()
        # Botocore's endpoint data behind Region validation: ~0.8 s to load, once, never on the event loop (the
        # first request naming a region used to stall every other request that long).
        await to_thread.run_sync(known_regions)
        if warm_aws:
            context.aws.warm_on_first_use()
        async with mcp_manager.run():
            freeze_startup_heap()
            lag_watch = asyncio.create_task(metrics.watch_loop())
            log.info("instantstart ready", extra={"url": settings.base_url, "version": __version__})
            yield
            lag_watch.cancel()
        await hub.stop()
        await context.runner.stop()
        await feeds.stop_all(context)
        await alert_evaluator.stop(context)
        context.informers.stop()
        context.db.dispose()
        for hook in on_shutdown:
            await to_thread.run_sync(hook)

    return lifespan


def create_app(
    settings: Settings | None = None,
    catalog: Catalog = CATALOG,
    on_shutdown: tuple[Callable[[], None], ...] = (),
    *,
    warm_aws: bool = False,
    clock: Clock = time.monotonic,
) -> ASGIApp:
    """Build the whole server application for `settings`; `on_shutdown` runs after the server stops; with
    `warm_aws` (`instantstart serve`) the AWS clients a cluster's creation uses are built in the background at
    the first authenticated request or the first client built, whichever comes first (an idle server holds none);
    `clock` measures the caches' intervals (a test injects one it can advance)."""
    settings = settings or Settings()
    load_all(settings.plugins)
    token = _token(settings)
    context = build_context(settings, clock)
    mcp_manager = session_manager(catalog, context, _allowed_hosts(settings))
    hub = EventHub(context, catalog, slots=SocketSlots("event sockets", settings.ws_sockets_per_client,
                                                       settings.ws_sockets), queue_size=settings.ws_queue_size)
    context.runner.add_listener(hub.on_operation)
    attach_timeline(context)
    feeds.attach(context)  # the timeline's feeds follow the cluster registry, never a read
    sessions = SessionStore()
    auth = Authenticator(token, context.db)

    metrics = Metrics(context.runner.store.stale_count)
    lifespan = _lifespan(context, hub, mcp_manager, metrics, settings, on_shutdown, warm_aws=warm_aws)
    app = FastAPI(
        title="InstantStart", version=__version__, lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.context = context
    _add_error_handlers(app)
    _add_public_routes(app, build_openapi(catalog), metrics)
    add_routes(app, catalog, context)
    add_ws_route(app, hub)
    log_slots = SocketSlots("log streams", settings.ws_log_streams_per_client, settings.ws_log_streams)
    add_log_ws_route(app, context, log_slots)
    metrics.watch_sockets(hub.slots, log_slots)
    sso = sso_gate(settings, context.db)  # None unless an OpenID Connect provider is configured
    add_web_routes(app, auth, sessions, sso=sso is not None)
    if sso is not None:
        add_oidc_routes(app, sso, sessions)
    cors = _cors(settings, app)
    gate = Gate(
        cors or app,
        auth,
        metrics,
        mcp_manager.handle_request,
        sessions,
        max_body=settings.max_request_bytes,
        cors=cors,
        cors_origins=tuple(settings.allowed_origins),
    )
    gate.fast_reads = fast_reads(catalog, context)
    gate.bearer_fallback = sso.bearer if sso is not None else None
    if warm_aws:
        gate.on_first_caller = context.aws.warm_in_background
    gate.fastapi = app  # type: ignore[attr-defined]
    return gate
