"""`instantstart mcp`: an MCP server over stdio that forwards every tool call to the REST API."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from instantstart.catalog import CATALOG
from instantstart.catalog.registry import OperationSpec
from instantstart.client import AsyncRestClient
from instantstart.mcp.tools import build_server
from instantstart.services import load_all
from instantstart.settings import Settings


async def serve_stdio(settings: Settings, server_url: str | None = None, token: str | None = None) -> None:
    """Serve the catalog's tools on stdin/stdout, each call becoming one REST request."""
    load_all(settings.plugins)
    client = AsyncRestClient(settings, server_url, token)

    async def call(spec: OperationSpec, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        return await client.call(spec, args)

    server = build_server(CATALOG, call, client.allowed)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await client.aclose()


def run(settings: Settings, server_url: str | None = None, token: str | None = None) -> None:
    """Blocking entry point."""
    anyio.run(serve_stdio, settings, server_url, token)
