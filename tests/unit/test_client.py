"""The REST client of the CLI and the stdio proxy: what it refuses and how an unreachable server reads."""

from __future__ import annotations

from pathlib import Path

from instantstart.client import RestClient
from instantstart.client_config import ClientConfig


def test_only_http_urls_are_opened() -> None:
    client = RestClient(ClientConfig("file:///etc/passwd", None, Path("/nonexistent")))
    failed, payload = client.call("cluster_list_all", {})
    assert failed and payload["error"]["code"] == "INVALID_INPUT"
    assert "INSTANTSTART_SERVER_URL" in payload["error"]["hint"]


def test_an_unreachable_server_is_an_error_payload_with_a_hint() -> None:
    client = RestClient(ClientConfig("http://127.0.0.1:9", "tok", Path("/nonexistent")), timeout=5)
    failed, payload = client.call("cluster_list_all", {})
    assert failed and payload["error"]["code"] == "UNREACHABLE"
    assert "instantstart serve" in payload["error"]["hint"]
    assert client.allowed() == set()
