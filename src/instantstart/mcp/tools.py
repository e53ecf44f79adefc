"""MCP tool definitions and the MCP server built from the catalog, whatever carries the calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from instantstart.catalog.index import tool_entry
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.schema import arguments_schema
from instantstart.mcp.tool_server import Visible, result_for, tool_server
from instantstart.mcp.wire import INSTRUCTIONS, SERVER_NAME, unknown_tool

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "build_server", "result_for", "tool_for", "tool_input_schema"]

# (is_error, payload): payload is the operation's JSON output, or {"error": {code, message, hint, details}}.
ToolCall = Callable[[OperationSpec, dict[str, Any]], Awaitable[tuple[bool, dict[str, Any]]]]


def tool_input_schema(spec: OperationSpec) -> dict[str, Any]:
    """The tool's JSON Schema: the operation's input model plus the optional clientToken."""
    return arguments_schema(spec.input_model)


def tool_for(spec: OperationSpec) -> types.Tool:
    """The MCP Tool for a catalog operation (the same JSON the catalog index gives `instantstart mcp`)."""
    return types.Tool.model_validate(tool_entry(spec))


def build_server(catalog: Catalog, call: ToolCall, visible: Visible | None = None) -> Server[Any]:
    """The MCP server of the catalog's operations, each call given to `call` with its spec."""

    async def call_named(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        spec = catalog.get(name)
        return unknown_tool(name) if spec is None else await call(spec, args)

    return tool_server([tool_for(spec) for spec in catalog], call_named, visible)
