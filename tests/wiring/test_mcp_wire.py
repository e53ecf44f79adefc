"""/mcp on the wire, as an agent that speaks an earlier protocol version sees it: camelCase fields, the error
body, and DNS-rebinding protection (the SDK's Python models are snake_case; the JSON must not be)."""

from __future__ import annotations

from typing import Any

from instantstart.catalog import CATALOG
from instantstart.mcp.tools import SERVER_NAME, tool_input_schema
from instantstart.services import load_all
from tests.support.servers import Running

load_all()

OLD_VERSION = "2025-06-18"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rpc(running: Running, method: str, params: dict[str, Any] | None = None, **headers: str) -> Any:
    """One JSON-RPC request to /mcp with the bearer token; the httpx response."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    with running.client() as client:
        return client.post("/mcp", json=body, headers={**ACCEPT, "MCP-Protocol-Version": OLD_VERSION, **headers})


def test_an_earlier_protocol_client_sees_camel_case_tools_and_results(server: Running) -> None:
    init = rpc(
        server,
        "initialize",
        {"protocolVersion": OLD_VERSION, "capabilities": {}, "clientInfo": {"name": "older-agent", "version": "1"}},
    )
    assert init.status_code == 200, init.text
    result = init.json()["result"]
    assert result["protocolVersion"] == OLD_VERSION
    assert result["serverInfo"]["name"] == SERVER_NAME
    assert result["capabilities"]["tools"] == {"listChanged": False}

    listed = rpc(server, "tools/list")
    assert listed.status_code == 200, listed.text
    tools = {tool["name"]: tool for tool in listed.json()["result"]["tools"]}
    assert set(tools) == {spec.name for spec in CATALOG}
    for spec in CATALOG:
        tool = tools[spec.name]
        assert tool["inputSchema"] == tool_input_schema(spec)
        assert "input_schema" not in tool
        assert tool["annotations"] == {
            "readOnlyHint": spec.read_only,
            "destructiveHint": spec.destructive,
            "idempotentHint": spec.idempotent,
            "openWorldHint": spec.open_world,
        }, spec.name
    # Calling a model sends the prompt out of the control plane (maybe to a billed endpoint): not read-only.
    assert tools["inference_call_model"]["annotations"]["readOnlyHint"] is False
    assert tools["inference_call_model"]["annotations"]["openWorldHint"] is True
    assert tools["inference_call_model"]["annotations"]["destructiveHint"] is False
    assert tools["cluster_timeline"]["annotations"]["readOnlyHint"] is True

    called = rpc(server, "tools/call", {"name": "no_such_tool", "arguments": {}})
    assert called.status_code == 200, called.text
    answer = called.json()["result"]
    error = {
        "code": "NOT_FOUND",
        "message": "Unknown tool 'no_such_tool'.",
        "hint": "List the tools to see the valid names.",
        "details": {},
    }
    assert answer["isError"] is True
    assert answer["structuredContent"] == {"error": error}
    assert answer["content"][0]["type"] == "text"


def test_dns_rebinding_protection_refuses_foreign_host_and_origin(server: Running) -> None:
    foreign_host = rpc(server, "tools/list", Host="attacker.example")
    assert foreign_host.status_code == 421, foreign_host.text
    foreign_origin = rpc(server, "tools/list", Origin="http://attacker.example")
    assert foreign_origin.status_code == 403, foreign_origin.text
    own = server.url.removeprefix("http://")
    allowed = rpc(server, "tools/list", Origin=f"http://{own}")
    assert allowed.status_code == 200, allowed.text
