"""A REST client of the control plane, shared by the CLI and the stdio MCP proxy.

It uses the standard library's HTTP client: httpx costs a CLI command about 0.2 s of imports (its own command
line, Rich and Pygments come with it) for one request. It trusts what httpx trusted: SSL_CERT_FILE or
SSL_CERT_DIR, else certifi's CA bundle; proxies from the environment (HTTPS_PROXY, NO_PROXY).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from typing import Any

from instantstart.client_config import ClientConfig
from instantstart.routes import API_PREFIX, tool_route

ME_PATH = API_PREFIX + "/me"


def tool_path(name: str) -> str:
    """The generic call route of a tool: the body is exactly the tool's arguments, so validation
    (and its error text) is the server's, whatever face the call came from."""
    return tool_route(name)


def connection(
    config: ClientConfig, server: str | None = None, token: str | None = None, face: str = "cli"
) -> tuple[str, dict[str, str]]:
    """Base URL and auth headers for the running server (`face` names this client in the audit trail)."""
    base = (server or config.url).rstrip("/")
    secret = token or config.token
    headers = {"Accept": "application/json", "X-InstantStart-Face": face}
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    return base, headers


def tls_context() -> ssl.SSLContext:
    """The CA certificates a client trusts: SSL_CERT_FILE, SSL_CERT_DIR, else certifi's bundle."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def error_payload(code: str, message: str, hint: str) -> dict[str, Any]:
    """An error the client itself reports, in the server's error form."""
    return {"error": {"code": code, "message": message, "hint": hint, "details": {}}}


def decode(status: int, body: bytes) -> tuple[bool, dict[str, Any]]:
    """(is_error, payload) from a REST response's status and body."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = error_payload("PROVIDER_ERROR", f"HTTP {status} with a non-JSON body", "Is the server URL right?")
    if not isinstance(payload, dict):
        payload = {"value": payload}
    return status >= 400, payload


def bad_url(url: str) -> dict[str, Any]:
    """The error payload when the server URL is not an http(s) URL (a file: URL would read a local file)."""
    return error_payload(
        "INVALID_INPUT",
        f"The server URL must start with http:// or https://, not {url[:80]!r}.",
        "Set INSTANTSTART_SERVER_URL (or --server) to the server's URL, e.g. http://127.0.0.1:3099.",
    )


def unreachable(exc: Exception) -> dict[str, Any]:
    """The error payload when the server cannot be reached."""
    return error_payload(
        "UNREACHABLE",
        f"Cannot reach the InstantStart server: {type(exc).__name__}",
        "Start it with `instantstart serve` or set INSTANTSTART_SERVER_URL.",
    )


class RestClient:
    """A client of one server (thread-safe: each request is its own connection)."""

    def __init__(
        self,
        config: ClientConfig,
        server: str | None = None,
        token: str | None = None,
        timeout: float = 330.0,
        face: str = "cli",
    ) -> None:
        self.base, self.headers = connection(config, server, token, face)
        self.timeout = timeout
        self._tls = tls_context() if self.base.startswith("https:") else None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
        if not self.base.startswith(("http://", "https://")):
            return True, bad_url(self.base)
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        # The scheme is http(s), checked above.
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls) as response:  # noqa: S310
                return decode(response.status, response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return decode(exc.code, exc.read())
        except (OSError, ValueError) as exc:  # URLError, refused, reset, timed out; a malformed URL
            return True, unreachable(exc)

    def call(self, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Call the operation `name`."""
        return self._request("POST", tool_path(name), args)

    def allowed(self) -> set[str]:
        """The names of the operations this client's token may call (none when the server refuses it)."""
        is_error, payload = self._request("GET", ME_PATH)
        names = payload.get("allowedOperations") if not is_error else None
        return {str(name) for name in names} if isinstance(names, list) else set()
