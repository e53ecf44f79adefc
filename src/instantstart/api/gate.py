"""The API's front door: who calls (bearer token, user token or browser session), request ids and metrics;
errors in their one HTTP form."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import to_thread
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from instantstart.api.limits import body_limit, buffer_body, declared_length, is_preflight, method_label, replay
from instantstart.api.metrics import Metrics
from instantstart.auth import Authenticator, bearer_value
from instantstart.errors import InstantStartError, PayloadTooLarge, Unauthorized
from instantstart.logs import request_id_var
from instantstart.principal import Principal, current_principal
from instantstart.web.sessions import SessionStore

log = logging.getLogger(__name__)

PUBLIC_PATHS = ("/healthz", "/metrics")
FACE_HEADER = "x-instantstart-face"  # what a bearer client says it is (the CLI, the stdio MCP proxy); audit only
PRINCIPAL_KEY = "instantstart.principal"


def error_response(exc: InstantStartError, request_id: str | None = None) -> JSONResponse:
    """The one HTTP form of an error: status from the class, body {error: {code, message, hint, details}}."""
    body = exc.to_dict()
    if request_id:
        body["details"] = {**body["details"], "requestId": request_id}
    return JSONResponse({"error": body}, status_code=exc.http_status)


class Gate:
    """Outermost ASGI layer: request ids, CORS preflights, auth for /api and /mcp (bearer token; for /api
    also the web UI's session cookie with its CSRF header or same-origin WebSocket), the one request-body
    limit (streamed, before any route reads the body), metrics, the MCP route."""

    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        metrics: Metrics,
        mcp: ASGIApp,
        sessions: SessionStore | None = None,
        *,
        max_body: int = 1 << 20,
        cors: ASGIApp | None = None,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.auth = auth
        self.metrics = metrics
        self.mcp = mcp
        self.sessions = sessions
        self.max_body = max_body
        self.cors = cors
        self.cors_origins = cors_origins
        self.fast_reads: dict[str, Callable[[Request], Awaitable[Response]]] = {}
        # Called once, at the first authenticated request (`serve` warms its AWS clients then: someone is using it).
        self.on_first_caller: Callable[[], None] | None = None
        # A bearer value that is no API token of ours: (principal, None), (None, why refused) or (None, None).
        self.bearer_fallback: Callable[[str, str, str], Awaitable[tuple[Principal | None, str | None]]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = headers.get("x-request-id") or uuid.uuid4().hex[:16]
        if not request_id.replace("-", "").isalnum() or len(request_id) > 64:
            request_id = uuid.uuid4().hex[:16]
        reset = request_id_var.set(request_id)
        path: str = scope.get("path", "")
        started = time.perf_counter()
        status_holder = {"status": 500}

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self._gate(scope, receive, send_wrapper, headers, request_id)
        finally:
            if scope["type"] == "http":
                route = _route_label(scope, path)
                method = method_label(scope.get("method", ""))
                self.metrics.latency.labels(method, route, str(status_holder["status"])).observe(
                    time.perf_counter() - started
                )
            request_id_var.reset(reset)

    async def _gate(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str], request_id: str) -> None:
        """A CORS preflight passes; /api and /mcp need a caller; a body over its limit is refused; then the route."""
        path: str = scope.get("path", "")
        if self.cors is not None and is_preflight(scope, headers) and headers["origin"] in self.cors_origins:
            await self.cors(scope, receive, send)  # a preflight carries no credentials by design
            return
        principal_reset = None
        try:
            if path.startswith("/api/") or path == "/api" or path == "/mcp" or path.startswith("/mcp/"):
                principal, problem = await self._authenticate(scope, path, headers)
                if principal is not None:
                    scope[PRINCIPAL_KEY] = principal
                    principal_reset = current_principal.set(principal)
                    if self.on_first_caller is not None:
                        first_caller, self.on_first_caller = self.on_first_caller, None
                        first_caller()
                if problem is not None:
                    await _refuse_caller(scope, receive, send, problem, request_id)
                    return
            if scope["type"] == "http":
                bounded = await self._bounded_body(scope, receive, send, path, request_id)
                if bounded is None:
                    return
                receive = bounded
            await self._route(scope, receive, send, path, headers)
        finally:
            if principal_reset is not None:
                current_principal.reset(principal_reset)

    async def _bounded_body(self, scope: Scope, receive: Receive, send: Send, path: str,
                            request_id: str) -> Receive | None:
        """The request's receive with its body buffered within the path's limit; None once a larger one is refused."""
        limit = body_limit(path, self.max_body)
        declared = declared_length(scope)
        body, refused = (b"", True) if declared is not None and (declared < 0 or declared > limit) else (
            await buffer_body(receive, limit)
        )
        if refused:
            too_large = PayloadTooLarge(
                f"The request body is larger than {limit} bytes; nothing was read or changed.",
                details={"limitBytes": limit},
            )
            response = error_response(too_large, request_id)
            response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return None
        return replay(body, receive)

    async def _route(self, scope: Scope, receive: Receive, send: Send, path: str, headers: dict[str, str]) -> None:
        """The MCP route, a registered hot read, or the FastAPI app."""
        if path in ("/mcp", "/mcp/"):
            await self.mcp(scope, receive, send)
            return
        fast = self.fast_reads.get(path) if scope["type"] == "http" and scope.get("method") == "GET" else None
        if fast is not None and "origin" not in headers:
            # A hot read (pollers): authenticated and bounded above; FastAPI's layers add nothing here.
            scope["instantstart.route"] = path
            await (await _fast_response(fast, Request(scope, receive)))(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _authenticate(
        self, scope: Scope, path: str, headers: dict[str, str]
    ) -> tuple[Principal | None, str | None]:
        """(the caller, None) or (None, why not): a bearer token (the bootstrap token or a user's), else for /api
        the web UI's session cookie (its CSRF header or same-origin WebSocket), re-checked against its token."""
        client = scope.get("client")
        source = str(client[0]) if client else ""
        value = bearer_value(headers.get("authorization"))
        if value is not None:
            found = self.auth.bootstrap(value)
            if found is None:
                resolved = await to_thread.run_sync(self.auth.resolve, value)
                found = resolved[0] if resolved else None
            said = headers.get(FACE_HEADER, "")
            face = "mcp" if path.startswith("/mcp") else said if said in ("cli", "mcp") else "rest"
            if found is not None:
                return found.via(face, source), None
            if self.bearer_fallback is not None:  # SSO: a JWT from the configured OpenID Connect provider
                sso_found, problem = await self.bearer_fallback(value, face, source)
                if sso_found is not None or problem is not None:
                    return sso_found, problem
        if self.sessions is None or not path.startswith("/api/"):
            return None, "Missing or invalid API token."
        problem = self.sessions.check(scope["type"], scope.get("method", "GET"), headers)
        session = self.sessions.from_headers(headers) if problem is None else None
        if session is None:
            return None, problem or "Missing or invalid API token."
        signed_in = session.principal
        current = None if signed_in is None else await to_thread.run_sync(self.auth.recheck, signed_in,
                                                                          session.token_id)
        if current is None:
            self.sessions.drop(session.sid)
            return None, "The token this session signed in with was revoked or has expired; sign in again."
        return current.via("ui", source), None


async def _refuse_caller(scope: Scope, receive: Receive, send: Send, problem: str, request_id: str) -> None:
    """401 for an unauthenticated request (a WebSocket closes with 4401), saying what is missing."""
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.close", "code": 4401, "reason": problem[:120]})
        return
    response = error_response(Unauthorized(problem), request_id)
    response.headers["WWW-Authenticate"] = 'Bearer realm="instantstart"'
    await response(scope, receive, send)


async def _fast_response(endpoint: Callable[[Request], Awaitable[Response]], request: Request) -> Response:
    """The endpoint's response, or the one error body (as the FastAPI error handlers shape it)."""
    try:
        return await endpoint(request)
    except InstantStartError as exc:
        return error_response(exc, request_id_var.get())
    except Exception:
        log.exception("unhandled error")
        return error_response(InstantStartError("Internal error."), request_id_var.get())


def _route_label(scope: Scope, path: str) -> str:
    if "instantstart.route" in scope:
        return str(scope["instantstart.route"])
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    if path.startswith("/mcp"):
        return "/mcp"
    return path if path in PUBLIC_PATHS else "other"
