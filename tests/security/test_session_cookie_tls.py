"""The session cookie is Secure when the server speaks TLS (or a trusted proxy says the browser did), never because
an untrusted client claims https in X-Forwarded-Proto; plain HTTP on loopback gets a cookie without Secure."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hyperpod_twin.kube.certs import make_certificates
from instantstart.server import uvicorn_options
from instantstart.settings import Settings
from tests.support.servers import SSL_CONTEXT, Running, thread_server


def signed_in_cookie(server: Running, headers: dict[str, str] | None = None) -> str:
    """The Set-Cookie header of a successful sign-in through the form."""
    with httpx.Client(base_url=server.url, timeout=30, verify=SSL_CONTEXT) as client:
        response = client.post("/sign-in", data={"token": server.token},
                               headers={"Origin": server.url, **(headers or {})})
    assert response.status_code == 303, response.text
    cookie: str = response.headers["set-cookie"]
    assert cookie.startswith("instantstart_session=") and "HttpOnly" in cookie
    return cookie


def test_tls_server_sets_a_secure_cookie(tmp_path: Path) -> None:
    certs = make_certificates("instantstart-test")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(certs.cert_pem + certs.ca_pem)
    key.write_bytes(certs.key_pem)
    SSL_CONTEXT.load_verify_locations(cadata=certs.ca_pem.decode())  # this test's CA, for this process's clients
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}", tls_cert_file=cert,
                       tls_key_file=key) as server:
        assert server.url.startswith("https://")
        assert "; secure" in signed_in_cookie(server).lower()


def test_plain_http_cookie_is_not_secure_and_forwarded_proto_needs_a_trusted_proxy(tmp_path: Path) -> None:
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}") as server:
        assert "secure" not in signed_in_cookie(server).lower()
        # Any local process could send this header; without trusted_proxies it is ignored.
        assert "secure" not in signed_in_cookie(server, {"X-Forwarded-Proto": "https"}).lower()
    with thread_server(tmp_path / "data2", f"sqlite:///{tmp_path / 'state2.db'}",
                       trusted_proxies=["127.0.0.1"]) as server:
        assert "; secure" in signed_in_cookie(server, {"X-Forwarded-Proto": "https"}).lower()
        assert "secure" not in signed_in_cookie(server).lower()


def test_tls_needs_both_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="TLS_KEY_FILE"):
        uvicorn_options(Settings(data_dir=tmp_path, tls_cert_file=tmp_path / "tls.crt"))
    assert uvicorn_options(Settings(data_dir=tmp_path)) == {"proxy_headers": False}
