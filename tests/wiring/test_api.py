"""The REST face: auth, error bodies for bad input, OpenAPI, health, metrics, request ids, logs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from tests.support.faces import unauthenticated
from tests.support.servers import Running, process_server


def test_every_api_and_mcp_request_needs_the_token(server: Running) -> None:
    with unauthenticated(server) as client:
        for method, path in (
            ("GET", "/api/v1/operations"),
            ("GET", "/api/v1/clusters"),
            ("POST", "/api/v1/wait"),
            ("POST", "/mcp"),
            ("GET", "/api/v1/openapi.json"),
            ("GET", "/api/v1/nothing-here"),
        ):
            response = client.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.json()["error"]["code"] == "UNAUTHORIZED"
            assert response.headers["www-authenticate"].startswith("Bearer")
        wrong = client.get("/api/v1/operations", headers={"Authorization": "Bearer " + "x" * len(server.token)})
        assert wrong.status_code == 401
        basic = client.get("/api/v1/operations", headers={"Authorization": f"Basic {server.token}"})
        assert basic.status_code == 401
        assert client.get("/healthz").json()["status"] == "ok"
    with server.client() as client:
        assert client.get("/api/v1/operations").status_code == 200


def test_token_file_is_private_and_stable(server: Running) -> None:
    path = server.data_dir / "api-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(server.token) >= 40


@pytest.mark.parametrize(
    ("body", "field", "status"),
    [
        (b'{"seconds": ', "(body)", 422),
        (b'["seconds", 1]', "(body)", 422),
        (b'{"seconds": "soon"}', "seconds", 422),
        (b'{"seconds": 0}', "seconds", 422),
        (b'{"seconds": 301}', "seconds", 422),
        (b'{"seconds": 5, "extra": true}', "extra", 422),
        (b"{}", "seconds", 422),
        (b'{"seconds": 1.5}', "seconds", 422),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(server: Running, body: bytes, field: str, status: int) -> None:
    with server.client() as client:
        response = client.post("/api/v1/wait", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == "INVALID_INPUT"
    assert field in error["message"]
    assert error["hint"]
    assert error["details"]["requestId"] == response.headers["x-request-id"]


def test_unknown_routes_and_methods_are_clear_errors(server: Running) -> None:
    with server.client() as client:
        missing = client.get("/api/v1/no/such/route")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        wrong_method = client.delete("/api/v1/operations")
        assert wrong_method.status_code == 405
        unknown_tool = client.post("/api/v1/tools/no_such_tool", json={})
        assert unknown_tool.status_code == 404
        switch = client.post("/api/v1/clusters/ghost/switch")
        assert switch.status_code == 404
        assert switch.json()["error"]["message"] == "No managed cluster has the tag 'ghost'."
        bad_tag = client.post("/api/v1/clusters/Not_A_Tag/switch")
        assert bad_tag.status_code == 422 and "clusterTag" in bad_tag.json()["error"]["message"]


def test_request_id_is_echoed_or_generated(server: Running) -> None:
    with server.client() as client:
        given = client.get("/api/v1/operations", headers={"X-Request-ID": "abc-123"})
        assert given.headers["x-request-id"] == "abc-123"
        generated = client.get("/api/v1/operations")
        assert len(generated.headers["x-request-id"]) == 16
        hostile = client.get("/api/v1/operations", headers={"X-Request-ID": "a\tb; drop"})
        assert hostile.headers["x-request-id"] != "a\tb; drop"


def test_metrics_expose_latency_and_operations_by_status(server: Running, tmp_path: Path) -> None:
    with server.client() as client:
        client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "j"), "stageSeconds": 0})
        client.get("/api/v1/operations")
    text = httpx.get(server.url + "/metrics").text
    series = 'instantstart_http_request_duration_seconds_count{method="GET",route="/api/v1/operations",status="200"}'
    assert series in text
    assert "instantstart_operations{status=" in text


def test_no_wildcard_cors_and_loopback_default() -> None:
    from instantstart.api.app import create_app
    from instantstart.settings import Settings

    assert Settings().host == "127.0.0.1"
    with pytest.raises(ValueError, match="wildcard"):
        create_app(Settings(data_dir=Path(os.environ.get("TMPDIR", "/tmp")) / "cors-test", allowed_origins=["*"]))


def test_openapi_document_is_valid_and_complete(server: Running) -> None:
    with server.client() as client:
        doc = client.get("/api/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    op = doc["paths"]["/api/v1/clusters/{clusterTag}/switch"]["post"]
    assert op["operationId"] == "cluster_switch"
    assert "202" in op["responses"]
    assert {p["name"] for p in op["parameters"]} == {"clusterTag", "Idempotency-Key"}
    wait = doc["paths"]["/api/v1/wait"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert wait["properties"]["seconds"]["maximum"] == 300 and wait["required"] == ["seconds"]
    listing = doc["paths"]["/api/v1/operations"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"status", "target", "kind", "limit", "offset"}


def test_the_token_never_appears_in_logs(tmp_path: Path, sqlite_url: str) -> None:
    log_path = tmp_path / "server.log"
    with process_server(tmp_path / "data", sqlite_url, log_path=log_path) as (running, _proc):
        with running.client() as client:
            client.get("/api/v1/operations", headers={"X-Debug": f"Bearer {running.token}"})
        with unauthenticated(running) as anon:
            anon.get("/api/v1/operations", headers={"Authorization": f"Bearer {running.token}x"})
        token = running.token
    text = log_path.read_text()
    # Shown once on first start (the terminal line), never in a JSON log record.
    log_records = [line for line in text.splitlines() if line.startswith("{")]
    assert log_records, "the server writes structured logs"
    assert not any(token in line for line in log_records)
    assert sum(token in line for line in text.splitlines()) == 1


def test_hot_reads_answer_alike_with_or_without_a_browser_origin(server: Running) -> None:
    """Reads on static paths are served by the Gate directly unless CORS is involved: same body, same errors."""
    with server.client() as client:
        direct = client.get("/api/v1/operations", headers={"X-Request-ID": "fast-1"})
        routed = client.get("/api/v1/operations", headers={"Origin": "http://127.0.0.1:9", "X-Request-ID": "r-1"})
        assert direct.status_code == routed.status_code == 200
        assert direct.json() == routed.json() and direct.headers["etag"] == routed.headers["etag"]
        assert direct.headers["x-request-id"] == "fast-1"
        assert client.get("/api/v1/operations", headers={"If-None-Match": direct.headers["etag"]}).status_code == 304
        bad = client.get("/api/v1/operations", params={"limit": "not-a-number"}, headers={"X-Request-ID": "fast-2"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_INPUT"
        assert bad.json()["error"]["details"]["requestId"] == "fast-2" and "limit" in bad.json()["error"]["message"]
        routed_bad = client.get("/api/v1/operations", params={"limit": "not-a-number"},
                                headers={"Origin": "http://127.0.0.1:9", "X-Request-ID": "fast-2"})
        assert routed_bad.status_code == 422 and routed_bad.json() == bad.json()
