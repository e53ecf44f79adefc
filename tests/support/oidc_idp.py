"""The tests' OpenID Connect provider (npm oidc-provider, tests/support/oidc_idp.mjs) as a child process, and a
user agent that signs in through its login form."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx

from instantstart.sso.provider import pkce_pair
from tests.support.servers import REPO, Running, thread_server

SCRIPT = REPO / "tests" / "support" / "oidc_idp.mjs"
CLIENT_ID = "instantstart-test"
CALLBACK = "/auth/oidc/callback"
GROUP_ROLES = {"admins": "admin", "operators": "operator", "viewers": "viewer"}
GROUP_TEAMS = {"ml": ["research"], "admins": ["platform"]}


@dataclass
class IdP:
    """A running provider: its issuer, our client's secret, the users file it re-reads at every sign-in."""

    issuer: str
    client_secret: str
    users_file: Path

    def set_users(self, users: dict[str, dict[str, Any]]) -> None:
        """Who may sign in: {account: {"email": ..., "groups": [...]}}."""
        self.users_file.write_text(json.dumps(users))

    def control(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Call one of the script's test-only control endpoints."""
        response = httpx.post(self.issuer + path, json=body, timeout=30)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def settings(self) -> dict[str, Any]:
        """The server settings that point SSO at this provider."""
        return {
            "oidc_issuer": self.issuer, "oidc_client_id": CLIENT_ID, "oidc_client_secret": self.client_secret,
            "oidc_group_roles": GROUP_ROLES, "oidc_group_teams": GROUP_TEAMS, "oidc_scopes": "openid email groups",
        }

    def mint(self, claims: dict[str, Any], foreign: bool = False) -> str:
        """A token signed with the provider's current key (`foreign`: with a key it never published)."""
        return str(self.control("/control/mint", {"claims": claims, "foreign": foreign})["token"])

    def id_token(self, login: str, redirect_uri: str) -> str:
        """An ID token the provider issues to our client for `login`: the authorization-code flow with PKCE,
        driven as the client would (the server's own flow is tested through it and in the browser)."""
        verifier, challenge = pkce_pair()
        query = {"response_type": "code", "client_id": CLIENT_ID, "redirect_uri": redirect_uri,
                 "scope": "openid email groups", "state": "s", "nonce": "n", "code_challenge": challenge,
                 "code_challenge_method": "S256"}
        with httpx.Client(timeout=30) as agent:
            back = sign_in_at_provider(agent, f"{self.issuer}/auth?{urlencode(query)}", login, redirect_uri)
            code = parse_qs(urlsplit(back).query)["code"][0]
            response = agent.post(f"{self.issuer}/token", auth=(CLIENT_ID, self.client_secret), data={
                "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": verifier})
        response.raise_for_status()
        return str(response.json()["id_token"])


def sign_in_at_provider(agent: httpx.Client, start: str, login: str, back_to: str) -> str:
    """Follow redirects from `start`, filling the provider's login form as `login`, until a redirect to
    `back_to`; returns that URL (not fetched)."""
    response = agent.get(start)
    for _ in range(12):
        if response.is_redirect:
            target = urljoin(str(response.url), response.headers["location"])
            if target.startswith(back_to):
                return target
            response = agent.get(target)
            continue
        form = re.search(r'<form[^>]*action="([^"]+)"', response.text)
        assert form is not None, f"no login form at {response.url}: {response.status_code} {response.text[:300]}"
        response = agent.post(urljoin(str(response.url), form.group(1)),
                              data={"prompt": "login", "login": login, "password": "unused"})
    raise AssertionError("the provider never redirected back")


@contextmanager
def sso_server(tmp: Path) -> Iterator[tuple[IdP, Running]]:
    """The provider and a server (in this process) whose SSO points at it."""
    with running_idp(tmp) as idp, thread_server(tmp / "data", f"sqlite:///{tmp / 'state.db'}",
                                                **idp.settings()) as server:
        idp.control("/control/redirect", {"uri": server.url + CALLBACK})
        yield idp, server


def web_sign_in(server: Running, login: str) -> tuple[httpx.Client, httpx.Response]:
    """A client that went through the server's own SSO sign-in as `login` (holding the session cookie when it
    succeeded) and the callback's answer."""
    agent = httpx.Client(base_url=server.url, timeout=30)
    back = sign_in_at_provider(agent, server.url + "/auth/oidc/login", login, server.url + CALLBACK)
    return agent, agent.get(back)


@contextmanager
def running_idp(tmp: Path, redirect_uri: str = "http://127.0.0.1:9/unset") -> Iterator[IdP]:
    """The provider on a random loopback port, until the block ends (ready when it prints its READY line)."""
    users = tmp / "idp-users.json"
    users.write_text("{}")
    secret = "idp-client-secret-" + secrets.token_urlsafe(24)
    proc = subprocess.Popen(["node", str(SCRIPT), str(users), CLIENT_ID, secret, redirect_uri], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the script listens (or exits: then the line is empty)
        assert line.startswith("READY "), f"the provider did not start (exit {proc.poll()}): {line!r}"
        yield IdP(line.split()[1], secret, users)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
