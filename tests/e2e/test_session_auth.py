"""Web sessions at the HTTP level: sign-in into an opaque HttpOnly cookie, CSRF header and Origin checks for
cookie-authenticated /api calls, the WebSocket's auth and its live operation events, sign-out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.servers import Running, thread_server

PLAN = {"instanceType": "ml.g6.4xlarge", "instanceCount": 1, "availabilityZone": "us-west-2c"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Running]:
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}") as running:
        yield running


def sign_in(server: Running) -> tuple[httpx.Client, str]:
    """A cookie-holding client signed in through the form, and the page's CSRF value."""
    client = httpx.Client(base_url=server.url, timeout=30)
    response = client.post("/sign-in", data={"token": server.token}, headers={"Origin": server.url})
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    sid = client.cookies["instantstart_session"]
    assert server.token not in sid and len(sid) >= 40
    page = client.get("/")
    assert page.status_code == 200 and 'type="module"' in page.text
    csrf = page.text.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
    assert server.token not in page.text
    return client, csrf


def test_sign_in_page_and_refusals(server: Running) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        page = client.get("/")
        assert page.status_code == 200 and 'name="token"' in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert client.post("/sign-in", data={"token": "wrong"}).status_code == 401
        assert "instantstart_session" not in client.cookies
        crossed = client.post("/sign-in", data={"token": server.token}, headers={"Origin": "http://evil.test"})
        assert crossed.status_code == 403 and "instantstart_session" not in client.cookies
        assert client.get("/api/v1/clusters").status_code == 401
        assert client.get("/static/app.js").status_code == 200


def test_cookie_auth_needs_the_csrf_header_for_changes(server: Running) -> None:
    client, csrf = sign_in(server)
    try:
        assert client.get("/api/v1/clusters").json()["count"] == 0
        refused = client.post("/api/v1/clusters/plan", json=PLAN)
        assert refused.status_code == 401 and "x-instantstart-csrf" in refused.json()["error"]["message"]
        wrong = client.post("/api/v1/clusters/plan", json=PLAN, headers={"X-InstantStart-CSRF": csrf + "x"})
        assert wrong.status_code == 401
        crossed = client.post(
            "/api/v1/clusters/plan", json=PLAN, headers={"X-InstantStart-CSRF": csrf, "Origin": "http://evil.test"}
        )
        assert crossed.status_code == 401
        ok = client.post("/api/v1/clusters/plan", json=PLAN, headers={"X-InstantStart-CSRF": csrf})
        assert ok.status_code != 401, ok.text
        # The session cookie is for /api only: MCP keeps requiring the bearer token.
        assert client.post("/mcp", json={}).status_code == 401
        # Sign-out needs the CSRF value too, then the session is gone.
        assert client.post("/sign-out", data={"csrf": "nope"}).status_code == 403
        assert client.get("/api/v1/clusters").status_code == 200
        out = client.post("/sign-out", data={"csrf": csrf})
        assert out.status_code == 303
        client.cookies.clear()
        stale = httpx.get(server.url + "/api/v1/clusters", headers={"Cookie": f"instantstart_session={'x' * 43}"})
        assert stale.status_code == 401
    finally:
        client.close()


def test_signed_out_session_id_no_longer_works(server: Running) -> None:
    client, csrf = sign_in(server)
    sid = client.cookies["instantstart_session"]
    client.post("/sign-out", data={"csrf": csrf})
    replay = httpx.get(server.url + "/api/v1/clusters", headers={"Cookie": f"instantstart_session={sid}"})
    assert replay.status_code == 401
    client.close()


def test_websocket_auth_and_live_operation_events(server: Running, tmp_path: Path) -> None:
    ws_url = server.url.replace("http://", "ws://") + "/api/v1/ws"
    for headers, origin in (({}, None), ({"Cookie": "instantstart_session=nope"}, server.url)):
        with pytest.raises(InvalidStatus):
            connect(ws_url, additional_headers=headers, origin=origin, open_timeout=60)
    client, _csrf = sign_in(server)
    cookie = f"instantstart_session={client.cookies['instantstart_session']}"
    with pytest.raises(InvalidStatus):  # the cookie from another origin (cross-site WebSocket hijacking)
        connect(ws_url, additional_headers={"Cookie": cookie}, origin="http://evil.test", open_timeout=60)
    with pytest.raises(InvalidStatus):  # no Origin at all: not a browser page of this server
        connect(ws_url, additional_headers={"Cookie": cookie}, open_timeout=60)
    with connect(ws_url, additional_headers={"Cookie": cookie}, origin=server.url, open_timeout=60) as socket:
        assert json.loads(socket.recv(timeout=60))["type"] == "hello"
        socket.send(json.dumps({"type": "refresh"}))
        snapshot = json.loads(socket.recv(timeout=60))
        assert snapshot["type"] == "resources" and snapshot["clusters"]["count"] == 0
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {server.token}"}, open_timeout=60) as socket:
        assert json.loads(socket.recv(timeout=60))["type"] == "hello"
        with server.client() as api:
            ref = api.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "j"), "stageSeconds": 0}).json()
        seen: list[str] = []
        while "SUCCEEDED" not in seen:
            event = json.loads(socket.recv(timeout=60))
            if event["type"] == "operation" and event["operation"]["operationId"] == ref["operationId"]:
                seen.append(event["operation"]["status"])
        assert seen[-1] == "SUCCEEDED"  # changes are coalesced per id, so intermediate states may be skipped
    client.close()


def test_session_store_expiry_limit_and_origin_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    from instantstart.web import sessions as mod

    clock = [1000.0]
    monkeypatch.setattr(mod.time, "monotonic", lambda: clock[0])
    store = mod.SessionStore(idle_seconds=60, max_age_seconds=300, limit=2)
    a = store.create()
    assert store.get(a.sid) is a and a.csrf != a.sid
    clock[0] += 59
    assert store.get(a.sid) is a  # touched: idle time starts again
    clock[0] += 61
    assert store.get(a.sid) is None  # idle too long
    b, c = store.create(), store.create()
    d = store.create()  # the store is full: the least recently used one goes
    assert store.get(b.sid) is None and store.get(c.sid) is c and store.get(d.sid) is d
    for _ in range(6):
        clock[0] += 55
        store.get(c.sid)
    assert store.get(c.sid) is None  # older than max_age_seconds even though in use
    assert mod.cookie_value('a=1; instantstart_session="x"; b=2', "instantstart_session") == "x"
    assert mod.cookie_value("garbage;;;=", "instantstart_session") is None
    assert mod.same_origin("http://127.0.0.1:3099", "127.0.0.1:3099")
    assert not mod.same_origin("http://127.0.0.1:3099.evil.test", "127.0.0.1:3099")
    assert not mod.same_origin("null", "127.0.0.1:3099")
    assert not mod.same_origin("ftp://127.0.0.1:3099", "127.0.0.1:3099")
