"""What both MCP servers (in-process over HTTP, stdio proxy) say alike: name, instructions, unknown-tool error."""

from __future__ import annotations

from typing import Any

SERVER_NAME = "hypd-inst"
INSTRUCTIONS = (
    "InstantStart drives Amazon SageMaker HyperPod clusters on Amazon EKS. Mutating tools return an"
    " operationId at once; poll the named status tool with wait_seconds in between until it reports a"
    " terminal state. Pass clientToken to make a retry return the same operation."
)


def unknown_tool(name: str) -> tuple[bool, dict[str, Any]]:
    """The error of a call naming no tool."""
    return True, {
        "error": {
            "code": "NOT_FOUND",
            "message": f"Unknown tool {name!r}.",
            "hint": "List the tools to see the valid names.",
            "details": {},
        }
    }
