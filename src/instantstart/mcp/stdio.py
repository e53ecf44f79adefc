"""`instantstart mcp`: an MCP server over stdio that forwards every tool call to the REST API.

Its tools come from the catalog index (data/catalog_index.json), so starting it imports neither the catalog nor
the services; the calls go to the server over the standard library's HTTP client, one worker thread each.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from anyio import to_thread
from mcp.server.stdio import stdio_server

from instantstart import catalog_index
from instantstart.client import RestClient
from instantstart.client_config import ClientConfig
from instantstart.mcp.tool_server import tool_server


async def serve_stdio(config: ClientConfig, server_url: str | None = None, token: str | None = None) -> None:
    """Serve the catalog's tools on stdin/stdout, each call becoming one REST request."""
    client = RestClient(config, server_url, token, face="mcp")
    tools = [types.Tool.model_validate(entry["tool"]) for entry in catalog_index.load(config.plugins)["operations"]]

    async def call(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        return await to_thread.run_sync(client.call, name, args, abandon_on_cancel=True)

    async def visible() -> set[str]:
        return await to_thread.run_sync(client.allowed, abandon_on_cancel=True)

    server = tool_server(tools, call, visible)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(config: ClientConfig, server_url: str | None = None, token: str | None = None) -> None:
    """Blocking entry point."""
    anyio.run(serve_stdio, config, server_url, token)
