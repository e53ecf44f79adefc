"""The streamable-HTTP MCP endpoint at /mcp, calling operations in-process."""

from __future__ import annotations

from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from instantstart.catalog.invoke import invoke_spec
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.roles import allowed
from instantstart.context import AppContext, CallContext
from instantstart.errors import InstantStartError, Unauthorized
from instantstart.mcp.tools import build_server
from instantstart.principal import current_principal


def session_manager(catalog: Catalog, context: AppContext, allowed_hosts: list[str]) -> StreamableHTTPSessionManager:
    """A stateless streamable-HTTP session manager serving the catalog's tools."""

    async def call(spec: OperationSpec, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        principal = current_principal.get()  # set by the API's gate for this request
        try:
            if principal is None:
                raise Unauthorized("Missing or invalid API token.")
            return False, await invoke_spec(spec, args, CallContext(app=context, face="mcp", principal=principal))
        except InstantStartError as exc:
            return True, {"error": exc.to_dict()}

    async def visible() -> set[str]:
        principal = current_principal.get()
        return set() if principal is None else set(allowed(catalog, principal))

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=[f"http://{h}" for h in allowed_hosts],
    )
    return StreamableHTTPSessionManager(
        app=build_server(catalog, call, visible), stateless=True, json_response=True, security_settings=security
    )
