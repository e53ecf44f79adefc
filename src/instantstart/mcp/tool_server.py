"""The MCP server named hypd-inst over a list of tools, each call forwarded by name (no catalog needed)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from instantstart import __version__
from instantstart.mcp.wire import INSTRUCTIONS, SERVER_NAME, unknown_tool

# (is_error, payload) of a call of the tool named: payload is the operation's JSON output, or
# {"error": {code, message, hint, details}}.
NamedCall = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, dict[str, Any]]]]
# The names of the tools the caller's role may call (the tool list shows only those).
Visible = Callable[[], Awaitable[set[str]]]


def result_for(is_error: bool, payload: dict[str, Any]) -> types.CallToolResult:
    """A tool result carrying the same JSON the REST API returns (as text and as structured content)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, separators=(",", ":")))],
        structured_content=payload,
        is_error=is_error,
    )


def tool_server(tools: list[types.Tool], call: NamedCall, visible: Visible | None = None) -> Server[Any]:
    """An MCP server named hypd-inst serving `tools` (with `visible`, only those the caller's role may call; a
    call of another is refused FORBIDDEN by the operation's role check); a call naming none is NOT_FOUND.

    Arguments reach the operation unvalidated by the SDK: the operation's own input model validates them, so an
    error names the field the same way on every face.
    """
    names = {tool.name for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if visible is None:
            return types.ListToolsResult(tools=tools)
        allowed = await visible()
        return types.ListToolsResult(tools=[tool for tool in tools if tool.name in allowed])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            return result_for(*unknown_tool(params.name))
        is_error, payload = await call(params.name, dict(params.arguments or {}))
        return result_for(is_error, payload)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


