"""Web routes: the page shell at /, sign-in with the API token into a session cookie, sign-out, static files."""

from __future__ import annotations

import hmac
import re
import threading
import time
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.staticfiles import StaticFiles

from instantstart import __version__
from instantstart.auth import Authenticator
from instantstart.principal import Principal
from instantstart.web.sessions import CSRF_HEADER, SESSION_COOKIE, SessionStore, cookie_value, same_origin

HERE = Path(__file__).parent
TEMPLATES = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
_HOST = re.compile(r"^[A-Za-z0-9.\-:\[\]]{1,255}$")
MAX_FORM = 16 * 1024


class FailureLimiter:
    """Slows token guessing per client address: at most `limit` failed sign-ins per `window` seconds from
    one address. Another address is never locked out by them. At most `max_clients` addresses are
    tracked (the least recently failing is forgotten first), so memory stays bounded."""

    def __init__(self, limit: int = 20, window: float = 60.0, max_clients: int = 4096) -> None:
        self.limit = limit
        self.window = window
        self.max_clients = max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def blocked(self, client: str) -> bool:
        """Whether sign-in from `client` is refused for now."""
        now = time.monotonic()
        with self._lock:
            times = self._failures.get(client)
            if times is None:
                return False
            while times and now - times[0] >= self.window:
                times.popleft()
            if not times:
                del self._failures[client]
                return False
            return len(times) >= self.limit

    def failed(self, client: str) -> None:
        """Record one failed attempt from `client`."""
        with self._lock:
            times = self._failures.pop(client, None) or deque(maxlen=self.limit)
            times.append(time.monotonic())
            self._failures[client] = times
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._failures)


def client_address(request: Request) -> str:
    """The peer address of a request (behind a reverse proxy every client shares the proxy's)."""
    return request.client.host if request.client else "unknown"


def security_headers(response: Response, host: str | None) -> Response:
    """CSP (same origin only, the WebSocket included), no framing, no referrer, no caching of pages."""
    ws = f" ws://{host} wss://{host}" if host and _HOST.match(host) else ""
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{ws}; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
    )
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"  # "no-referrer" would make Origin "null"
    response.headers["Cache-Control"] = "no-store"
    return response


def _page(request: Request, template: str, status: int = 200, **values: Any) -> Response:
    html = TEMPLATES.get_template(template).render(version=__version__, **values)
    return security_headers(HTMLResponse(html, status_code=status), request.headers.get("host"))


def _form(raw: bytes) -> dict[str, str]:
    fields = parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=10)
    return {k: v[0] for k, v in fields.items() if v}


def start_session(
    request: Request, sessions: SessionStore, principal: Principal, token_id: str | None, response: Response
) -> Response:
    """A new session of `principal` (any old one of this browser dropped: ids are never reused), its cookie
    set on `response`."""
    sessions.drop(cookie_value(request.headers.get("cookie"), SESSION_COOKIE))
    session = sessions.create(principal, token_id)
    response.set_cookie(
        SESSION_COOKIE,
        session.sid,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return security_headers(response, request.headers.get("host"))


def add_web_routes(
    app: FastAPI, auth: Authenticator, sessions: SessionStore, limiter: FailureLimiter | None = None,
    *, sso: bool = False,
) -> None:
    """Mount the UI: GET / (shell or sign-in, with "Sign in with SSO" when `sso`), POST /sign-in (the
    bootstrap token or a user's API token), POST /sign-out, /static."""
    limiter = limiter or FailureLimiter()

    @app.get("/", include_in_schema=False)
    async def index(request: Request) -> Response:
        session = sessions.from_headers({"cookie": request.headers.get("cookie", "")})
        if session is None:
            return _page(request, "signin.html", sso=sso)
        return _page(request, "app.html", csrf=session.csrf)

    @app.post("/sign-in", include_in_schema=False)
    async def sign_in(request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin and not same_origin(origin, request.headers.get("host")):
            return _page(request, "signin.html", 403, error="Sign in from this server's own page.")
        client = client_address(request)
        if limiter.blocked(client):
            return _page(request, "signin.html", 429, error="Too many failed sign-ins; wait a minute and try again.")
        raw = await request.body()  # at most 16 KiB: the Gate refuses larger sign-in bodies unread
        supplied = _form(raw[:MAX_FORM]).get("token", "").strip()
        found = await to_thread.run_sync(auth.resolve, supplied) if supplied else None
        if found is None:
            limiter.failed(client)
            return _page(request, "signin.html", 401, error="That is not the API token of this server.")
        return start_session(request, sessions, *found, RedirectResponse("/", status_code=303))

    @app.post("/sign-out", include_in_schema=False)
    async def sign_out(request: Request) -> Response:
        sid = cookie_value(request.headers.get("cookie"), SESSION_COOKIE)
        session = sessions.get(sid)
        raw = await request.body()
        sent = request.headers.get(CSRF_HEADER) or _form(raw[:MAX_FORM]).get("csrf", "")
        if session is not None and hmac.compare_digest(sent.encode(), session.csrf.encode()):
            sessions.drop(sid)
        elif session is not None:
            return _page(request, "signin.html", 403, error="Sign out from this server's own page.")
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return security_headers(response, request.headers.get("host"))

    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
