"""SSO sign-in in the browser: GET /auth/oidc/login sends the browser to the provider (authorization code with
PKCE S256, state and nonce kept here, short-lived and single-use); GET /auth/oidc/callback signs the user in."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from instantstart.sso.provider import TokenRefused, pkce_pair
from instantstart.sso.signin import NoMappedGroup, SsoGate
from instantstart.store.sso import SSO_SESSION
from instantstart.web.routes import _page as page
from instantstart.web.routes import client_address, security_headers, start_session
from instantstart.web.sessions import SessionStore, cookie_value

FLOW_COOKIE = "instantstart_oidc"  # binds a pending sign-in to the browser that started it
FLOW_SECONDS = 600.0


@dataclass(frozen=True)
class PendingLogin:
    """What a sign-in sent to the provider, to check what comes back."""

    verifier: str
    nonce: str
    binding: str
    started: float


class PendingLogins:
    """Pending sign-ins by state: each is taken once, within FLOW_SECONDS; at most `limit` are kept."""

    def __init__(self, limit: int = 1000) -> None:
        self.limit = limit
        self._pending: dict[str, PendingLogin] = {}
        self._lock = threading.Lock()

    def add(self, state: str, login: PendingLogin) -> None:
        """Remember a sign-in (the oldest goes when full)."""
        with self._lock:
            now = time.monotonic()
            for key in [k for k, v in self._pending.items() if now - v.started > FLOW_SECONDS]:
                del self._pending[key]
            if len(self._pending) >= self.limit:
                del self._pending[min(self._pending, key=lambda k: self._pending[k].started)]
            self._pending[state] = login

    def take(self, state: str) -> PendingLogin | None:
        """The sign-in sent with `state`, forgotten now; None when unknown, used or too old."""
        with self._lock:
            login = self._pending.pop(state, None)
        return login if login is not None and time.monotonic() - login.started <= FLOW_SECONDS else None


def add_oidc_routes(app: FastAPI, sso: SsoGate, sessions: SessionStore) -> None:
    """Mount GET /auth/oidc/login and GET /auth/oidc/callback."""
    pending = PendingLogins()

    def refused(request: Request, status: int, message: str) -> Response:
        return page(request, "signin.html", status, error=message, sso=True)

    @app.get("/auth/oidc/login", include_in_schema=False)
    async def oidc_login(request: Request) -> Response:
        state, nonce, binding = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier, challenge = pkce_pair()
        try:
            target = await sso.provider.authorize_url(state, nonce, challenge)
        except (httpx.HTTPError, TokenRefused, KeyError, ValueError):
            return refused(request, 502, "The sign-in provider cannot be reached; try again or use an API token.")
        pending.add(state, PendingLogin(verifier, nonce, binding, time.monotonic()))
        response = RedirectResponse(target, status_code=303)
        # Lax: the provider's redirect back is a top-level navigation from another site.
        response.set_cookie(FLOW_COOKIE, binding, max_age=int(FLOW_SECONDS), httponly=True, samesite="lax",
                            path="/auth/oidc", secure=request.url.scheme == "https")
        return security_headers(response, request.headers.get("host"))

    @app.get("/auth/oidc/callback", include_in_schema=False)
    async def oidc_callback(request: Request) -> Response:
        source = client_address(request)
        login = pending.take(request.query_params.get("state", ""))
        bound = cookie_value(request.headers.get("cookie"), FLOW_COOKIE) or ""
        if login is None or not hmac.compare_digest(bound.encode(), login.binding.encode()):
            await sso.audit("unknown", "", "ui", source, "denied", "INVALID_STATE")
            return refused(request, 400, "This sign-in expired or was not started here; sign in again.")
        code = request.query_params.get("code")
        if not code:
            await sso.audit("unknown", "", "ui", source, "denied", "PROVIDER_REFUSED")
            return refused(request, 401, "The sign-in provider did not sign you in; try again.")
        try:
            claims = await sso.provider.validate(await sso.provider.exchange(code, login.verifier), login.nonce)
            user = await sso.user_for(claims)
        except (TokenRefused, httpx.HTTPError):
            await sso.audit("unknown", "", "ui", source, "denied", "INVALID_TOKEN")
            return refused(request, 401, "The sign-in provider's answer could not be verified; sign in again.")
        except NoMappedGroup as exc:
            await sso.audit(exc.who, "", "ui", source, "denied", "NO_MAPPED_GROUP")
            return refused(request, 403, "You are signed in at the provider, but in none of the groups this server"
                           " gives a role to. Ask an administrator to add you to one, then sign in again.")
        await sso.audit(user.name, user.role, "ui", source, "ok")
        principal = sso.principal(user).via("ui", source)
        # A page (not a redirect) continues to /: the Strict session cookie then travels on a same-site navigation.
        response = start_session(request, sessions, principal, SSO_SESSION, page(request, "sso_done.html"))
        response.delete_cookie(FLOW_COOKIE, path="/auth/oidc")
        return response
