"""SSO against a real OpenID Connect provider (npm oidc-provider): sign-in through the server's code flow with
PKCE, groups -> role and teams at every sign-in, and the provider's JWTs at the API gate: expired, wrong
audience, bad signature and rotated keys refused or accepted as they should be; nothing secret logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from instantstart.errors import InvalidInput
from instantstart.settings import Settings
from instantstart.sso.config import oidc_config
from instantstart.store.sso import sso_user
from tests.support.oidc_idp import CALLBACK, CLIENT_ID, IdP, sso_server, web_sign_in
from tests.support.servers import Running

USERS = {
    "alice": {"email": "alice@example.com", "groups": ["admins", "ml"]},
    "bob": {"email": "bob@example.com", "groups": ["viewers", "unmapped"]},
    "carol": {"email": "carol@example.com", "groups": ["unmapped"]},
}


@pytest.fixture
def sso(tmp_path: Path) -> Iterator[tuple[IdP, Running]]:
    with sso_server(tmp_path) as (idp, server):
        idp.set_users(USERS)
        yield idp, server


def me(client: httpx.Client, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get("/api/v1/me", headers=headers)


def test_web_sign_in_maps_groups_to_roles_and_teams_at_every_sign_in(sso: tuple[IdP, Running]) -> None:
    idp, server = sso
    alice, answer = web_sign_in(server, "alice")
    assert answer.status_code == 200 and 'http-equiv="refresh"' in answer.text
    assert me(alice).json()["user"] == "alice" and me(alice).json()["role"] == "admin"
    bob, _ = web_sign_in(server, "bob")
    assert (me(bob).json()["user"], me(bob).json()["role"]) == ("bob", "viewer")
    stored = sso_user(server.context.db, "alice")
    assert stored is not None and stored.teams == ["platform", "research"] and stored.email == "alice@example.com"

    # Alice leaves the admin group at the provider: her next sign-in gives the role her groups map to now.
    idp.set_users({**USERS, "alice": {"email": "alice@example.com", "groups": ["operators"]}})
    again, _ = web_sign_in(server, "alice")
    assert me(again).json()["role"] == "operator"
    assert sso_user(server.context.db, "alice").teams == []  # type: ignore[union-attr]

    # In no mapped group: a clear refusal, no session.
    carol, refused = web_sign_in(server, "carol")
    assert refused.status_code == 403 and "none of the groups" in refused.text
    assert "instantstart_session" not in carol.cookies and me(carol).status_code == 401

    with server.client() as admin:
        entries = admin.get("/api/v1/audit", params={"operation": "sso_sign_in"}).json()["entries"]
    seen = {(e["user"], e["outcome"], e["errorCode"], e["face"]) for e in entries}
    assert {("alice", "ok", "", "ui"), ("bob", "ok", "", "ui"),
            ("carol@example.com", "denied", "NO_MAPPED_GROUP", "ui")} <= seen
    # An admin deletes Bob: his SSO session ends at once (his next sign-in creates him again).
    with server.client() as admin:
        assert admin.post("/api/v1/users/bob/delete", json={}).status_code == 200
    assert me(bob).status_code == 401
    for client in (alice, bob, again, carol):
        client.close()


def test_an_sso_user_never_takes_over_a_local_user(sso: tuple[IdP, Running]) -> None:
    idp, server = sso
    idp.set_users({"mallory": {"email": "admin@example.com", "groups": ["viewers"]}})
    mallory, _ = web_sign_in(server, "mallory")
    who = me(mallory).json()
    assert who["user"].startswith("admin-") and who["role"] == "viewer"
    with server.client() as admin:
        assert me(admin).json() == {**me(admin).json(), "user": "admin", "role": "admin"}
    mallory.close()


def test_a_callback_not_started_here_or_replayed_is_refused(sso: tuple[IdP, Running]) -> None:
    _idp, server = sso
    with httpx.Client(base_url=server.url, timeout=30) as stranger:
        forged = stranger.get(CALLBACK, params={"code": "x", "state": "never-sent"})
        assert forged.status_code == 400 and "instantstart_session" not in stranger.cookies
    login = httpx.get(server.url + "/auth/oidc/login")
    query = httpx.URL(login.headers["location"]).params
    assert query["code_challenge_method"] == "S256" and query["client_id"] == CLIENT_ID
    assert query["nonce"] and query["state"] and len(query["code_challenge"]) == 43
    # The state is bound to the browser that started the sign-in: another one cannot complete it.
    with httpx.Client(base_url=server.url, timeout=30) as other:
        assert other.get(CALLBACK, params={"code": "x", "state": query["state"]}).status_code == 400


def test_provider_jwts_at_the_api(sso: tuple[IdP, Running], caplog: pytest.LogCaptureFixture) -> None:
    idp, server = sso
    caplog.set_level(logging.DEBUG)
    redirect = server.url + CALLBACK
    token = idp.id_token("alice", redirect)
    with httpx.Client(base_url=server.url, timeout=30) as api:
        accepted = me(api, token)
        assert accepted.status_code == 200 and accepted.json()["role"] == "admin", accepted.text
        assert me(api, server.token).json()["user"] == "admin"  # our own API tokens keep working

        now = int(time.time())
        claims = {"iss": idp.issuer, "sub": "alice", "aud": CLIENT_ID, "iat": now, "exp": now + 300,
                  "groups": ["admins"]}
        assert me(api, idp.mint(claims)).status_code == 200  # the same key, minted by the test: control
        refusals = {
            "expired": idp.mint({**claims, "iat": now - 7200, "exp": now - 3600}),
            "another audience": idp.mint({**claims, "aud": "someone-else"}),
            "signature": idp.mint(claims, foreign=True),
            "another issuer": idp.mint({**claims, "iss": "http://127.0.0.1:1"}),
            "not a JWT": "a.b.c",
        }
        for reason, bad in refusals.items():
            refused = me(api, bad)
            assert refused.status_code == 401, (reason, refused.text)
            assert reason in refused.json()["error"]["message"], refused.text
        assert me(api, "opaque-access-token").status_code == 401

        # Key rotation: the provider's new key is fetched on its first unknown kid; the old key is gone then.
        assert idp.control("/control/rotate", {})["kid"] == "key-2"
        rotated = idp.id_token("bob", redirect)
        assert me(api, rotated).json()["user"] == "bob"
        gone = me(api, token)
        assert gone.status_code == 401 and "signing key" in gone.json()["error"]["message"]

    with server.client() as admin:
        entries = admin.get("/api/v1/audit", params={"operation": "sso_sign_in", "outcome": "denied"}).json()
    assert {e["errorCode"] for e in entries["entries"]} == {"INVALID_TOKEN"}
    stored = b"".join(p.read_bytes() for p in server.data_dir.parent.glob("state.db*"))
    for secret in (idp.client_secret, token, rotated):
        assert secret not in caplog.text, "a secret reached the log"
        assert secret.encode() not in stored, "a secret reached the database"


def test_configuration_is_checked() -> None:
    assert oidc_config(Settings()) is None  # off unless configured
    base = {"oidc_client_id": "c", "oidc_client_secret": "s3cr3t-value"}
    with pytest.raises(InvalidInput, match="https"):
        oidc_config(Settings(oidc_issuer="http://idp.example.com", **base))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unknown roles"):
        oidc_config(Settings(oidc_issuer="https://idp.example.com", oidc_group_roles={"g": "root"},
                             **base))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="CLIENT_ID"):
        oidc_config(Settings(oidc_issuer="https://idp.example.com"))
    config = oidc_config(Settings(oidc_issuer="http://127.0.0.1:8/", oidc_group_roles={"a": "admin", "v": "viewer"},
                                  server_url="https://ctl.example.com", **base))  # type: ignore[arg-type]
    assert config is not None and config.issuer == "http://127.0.0.1:8"
    assert config.redirect_uri == "https://ctl.example.com/auth/oidc/callback"
    assert config.role_for(["v", "a", "x"]) == "admin" and config.role_for(["x"]) is None
    assert "s3cr3t-value" not in repr(config)
