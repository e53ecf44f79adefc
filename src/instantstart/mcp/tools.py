"""MCP tool definitions and the MCP server built from the catalog, whatever carries the calls."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server

from instantstart import __version__
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.schema import arguments_schema

SERVER_NAME = "hypd-inst"
INSTRUCTIONS = (
    "InstantStart drives Amazon SageMaker HyperPod clusters on Amazon EKS. Mutating tools return an"
    " operationId at once; poll the named status tool with wait_seconds in between until it reports a"
    " terminal state. Pass clientToken to make a retry return the same operation."
)

# (is_error, payload): payload is the operation's JSON output, or {"error": {code, message, hint, details}}.
ToolCall = Callable[[OperationSpec, dict[str, Any]], Awaitable[tuple[bool, dict[str, Any]]]]


def tool_input_schema(spec: OperationSpec) -> dict[str, Any]:
    """The tool's JSON Schema: the operation's input model plus the optional clientToken."""
    return arguments_schema(spec.input_model)


def tool_for(spec: OperationSpec) -> types.Tool:
    """The MCP Tool for a catalog operation."""
    return types.Tool(
        name=spec.name,
        description=spec.tool_description,
        inputSchema=tool_input_schema(spec),
        annotations=types.ToolAnnotations(
            readOnlyHint=spec.read_only,
            destructiveHint=spec.destructive,
            idempotentHint=spec.idempotent,
            openWorldHint=spec.mutating,
        ),
    )


def result_for(is_error: bool, payload: dict[str, Any]) -> types.CallToolResult:
    """A tool result carrying the same JSON the REST API returns (as text and as structured content)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, separators=(",", ":")))],
        structuredContent=payload,
        isError=is_error,
    )


def build_server(catalog: Catalog, call: ToolCall) -> Server[Any, Any]:
    """An MCP server named hypd-inst whose tools are the catalog's operations."""
    server: Server[Any, Any] = Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS)
    tools = [tool_for(spec) for spec in catalog]

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        spec = catalog.get(name)
        if spec is None:
            return result_for(
                True,
                {
                    "error": {
                        "code": "NOT_FOUND",
                        "message": f"Unknown tool {name!r}.",
                        "hint": "List the tools to see the valid names.",
                        "details": {},
                    }
                },
            )
        is_error, payload = await call(spec, dict(arguments or {}))
        return result_for(is_error, payload)

    return server
