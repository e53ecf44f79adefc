"""A REST client of the control plane, shared by the CLI and the stdio MCP proxy."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.auth import read_token
from instantstart.catalog.registry import OperationSpec
from instantstart.catalog.routes import API_PREFIX, tool_route
from instantstart.settings import Settings

ME_PATH = API_PREFIX + "/me"


def tool_path(spec: OperationSpec) -> str:
    """The generic call route of a tool: the body is exactly the tool's arguments, so validation
    (and its error text) is the server's, whatever face the call came from."""
    return tool_route(spec.name)


def connection(
    settings: Settings, server: str | None = None, token: str | None = None, face: str = "cli"
) -> tuple[str, dict[str, str]]:
    """Base URL and auth headers for the running server (`face` names this client in the audit trail)."""
    base = (server or settings.base_url).rstrip("/")
    secret = token or read_token(settings)
    headers = {"Accept": "application/json", "X-InstantStart-Face": face}
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    return base, headers


def decode(response: httpx.Response) -> tuple[bool, dict[str, Any]]:
    """(is_error, payload) from a REST response."""
    try:
        payload = response.json()
    except ValueError:
        payload = {
            "error": {
                "code": "PROVIDER_ERROR",
                "message": f"HTTP {response.status_code} with a non-JSON body",
                "hint": "Is the server URL right?",
                "details": {},
            }
        }
    if not isinstance(payload, dict):
        payload = {"value": payload}
    return response.status_code >= 400, payload


def unreachable(exc: Exception) -> dict[str, Any]:
    """The error payload when the server cannot be reached."""
    return {
        "error": {
            "code": "UNREACHABLE",
            "message": f"Cannot reach the InstantStart server: {type(exc).__name__}",
            "hint": "Start it with `instantstart serve` or set INSTANTSTART_SERVER_URL.",
            "details": {},
        }
    }


class RestClient:
    """Synchronous client (the CLI)."""

    def __init__(
        self, settings: Settings, server: str | None = None, token: str | None = None, timeout: float = 330.0
    ) -> None:
        base, headers = connection(settings, server, token)
        self.http = httpx.Client(base_url=base, headers=headers, timeout=timeout)

    def call(self, spec: OperationSpec, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Call one operation."""
        try:
            return decode(self.http.post(tool_path(spec), json=args))
        except httpx.HTTPError as exc:
            return True, unreachable(exc)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


class AsyncRestClient:
    """Asynchronous client (the stdio MCP proxy)."""

    def __init__(
        self, settings: Settings, server: str | None = None, token: str | None = None, timeout: float = 330.0
    ) -> None:
        base, headers = connection(settings, server, token, face="mcp")
        self.http = httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout)

    async def call(self, spec: OperationSpec, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Call one operation."""
        try:
            response = await self.http.post(tool_path(spec), json=args)
        except httpx.HTTPError as exc:
            return True, unreachable(exc)
        return decode(response)

    async def allowed(self) -> set[str]:
        """The names of the operations this client's token may call (none when the server refuses it)."""
        try:
            response = await self.http.get(ME_PATH)
        except httpx.HTTPError:
            return set()
        is_error, payload = decode(response)
        names = payload.get("allowedOperations") if not is_error else None
        return {str(name) for name in names} if isinstance(names, list) else set()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()
