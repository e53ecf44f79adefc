"""Browser sessions: opaque random ids in an HttpOnly cookie, a per-session CSRF value, kept in memory."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from instantstart.principal import Principal

SESSION_COOKIE = "instantstart_session"
CSRF_HEADER = "x-instantstart-csrf"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass
class Session:
    """One signed-in browser."""

    sid: str
    csrf: str
    created: float
    last_seen: float
    principal: Principal | None = field(default=None)
    token_id: str | None = None  # the user token signed in with (None: the bootstrap token)


class SessionStore:
    """Server-side session map; a session expires after `idle_seconds` unused or `max_age_seconds` in all."""

    def __init__(self, idle_seconds: float = 8 * 3600, max_age_seconds: float = 7 * 24 * 3600, limit: int = 1000):
        self.idle_seconds = idle_seconds
        self.max_age_seconds = max_age_seconds
        self.limit = limit
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, principal: Principal | None = None, token_id: str | None = None) -> Session:
        """A new session of `principal` (the oldest one goes when the store is full)."""
        now = time.monotonic()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now, now, principal, token_id)
        with self._lock:
            self._expire(now)
            if len(self._sessions) >= self.limit:
                oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
                del self._sessions[oldest.sid]
            self._sessions[session.sid] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session with this id, touched; None when unknown or expired."""
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(sid)
            if session is None:
                return None
            if now - session.last_seen > self.idle_seconds or now - session.created > self.max_age_seconds:
                del self._sessions[sid]
                return None
            session.last_seen = now
            return session

    def drop(self, sid: str | None) -> None:
        """Forget a session (sign-out)."""
        if sid:
            with self._lock:
                self._sessions.pop(sid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _expire(self, now: float) -> None:
        dead = [
            sid
            for sid, s in self._sessions.items()
            if now - s.last_seen > self.idle_seconds or now - s.created > self.max_age_seconds
        ]
        for sid in dead:
            del self._sessions[sid]

    def from_headers(self, headers: dict[str, str]) -> Session | None:
        """The session named by the request's cookie header, if any."""
        return self.get(cookie_value(headers.get("cookie"), SESSION_COOKIE))

    def check(self, kind: str, method: str, headers: dict[str, str]) -> str | None:
        """Authorize a cookie-authenticated /api request or WebSocket: None when allowed, else why not.
        State-changing requests need the session's CSRF header; a WebSocket (which cannot carry one)
        needs an Origin equal to the server's own; any Origin sent must be the server's own."""
        session = self.from_headers(headers)
        if session is None:
            return "Missing or invalid API token."
        origin = headers.get("origin")
        if kind == "websocket":
            if not origin or not same_origin(origin, headers.get("host")):
                return "A cookie-authenticated WebSocket must come from this server's own pages."
            return None
        if origin and not same_origin(origin, headers.get("host")):
            return "Cross-origin requests cannot use the browser session."
        if method.upper() not in SAFE_METHODS:
            sent = headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                return f"A state-changing request with the browser session needs the {CSRF_HEADER} header."
        return None


def cookie_value(header: str | None, name: str) -> str | None:
    """One cookie's value from a Cookie header."""
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def same_origin(origin: str, host: str | None) -> bool:
    """Whether an Origin header names the host the request was sent to (scheme http or https)."""
    if not host or origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower() and not parts.path
