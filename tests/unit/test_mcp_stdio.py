"""The stdio MCP proxy's protocol handling: eras, envelopes, errors, cancellation (the SDK clients drive it over a real
server in tests/wiring/test_faces.py)."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

from instantstart.mcp.stdio import StdioProxy

TOOLS = [{"name": "echo", "description": "d", "inputSchema": {"type": "object"}},
         {"name": "hidden", "description": "h", "inputSchema": {"type": "object"}}]
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def run(*messages: Any, call: Any = None) -> list[dict[str, Any]]:
    """Feed `messages` (dicts, or raw strings) to a proxy and return its answers in order."""
    out = io.BytesIO()
    proxy = StdioProxy(TOOLS, call or (lambda name, args: (False, {"got": args})), lambda: {"echo"}, out)
    source = io.BytesIO(b"".join((m if isinstance(m, str) else json.dumps(m)).encode() + b"\n" for m in messages))
    proxy.serve(source)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def request(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def test_handshake_era_answers_as_the_sdk_does() -> None:
    init, listed, called, unknown = run(
        request(1, "initialize", protocolVersion="2025-06-18", capabilities={}, clientInfo={"name": "t"}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(2, "tools/list"), request(3, "tools/call", name="echo", arguments={"a": 1}),
        request(4, "tools/call", name="nope", arguments={}))
    assert init["result"]["protocolVersion"] == "2025-06-18"
    assert init["result"]["serverInfo"]["name"] == "hypd-inst"
    assert [t["name"] for t in listed["result"]["tools"]] == ["echo"]  # only what the caller's role may call
    assert called["result"] == {"content": [{"type": "text", "text": '{"got":{"a":1}}'}],
                                "structuredContent": {"got": {"a": 1}}, "isError": False}
    assert unknown["result"]["isError"] and unknown["result"]["structuredContent"]["error"]["code"] == "NOT_FOUND"


def test_an_unknown_revision_gets_the_newest_handshake_one() -> None:
    [init] = run(request(1, "initialize", protocolVersion="1999-01-01", capabilities={}))
    assert init["result"]["protocolVersion"] == "2025-11-25"


def test_modern_era_discovers_and_stamps_every_result() -> None:
    discover, listed, refused_init = run(request(1, "server/discover", _meta=MODERN_META),
                                         request(2, "tools/list", _meta=MODERN_META),
                                         request(3, "initialize", protocolVersion="2025-11-25"))
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    assert discover["result"]["resultType"] == "complete"
    assert listed["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hypd-inst"
    assert listed["result"]["ttlMs"] == 0 and [t["name"] for t in listed["result"]["tools"]] == ["echo"]
    assert refused_init["error"]["code"] == -32022
    assert refused_init["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_envelope_errors_name_what_is_wrong() -> None:
    wrong, missing = run(
        request(1, "tools/list", _meta={**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
        request(2, "tools/list", _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28"}))
    assert wrong["error"]["code"] == -32022 and wrong["error"]["data"]["requested"] == "2099-01-01"
    assert missing["error"]["code"] == -32602 and "clientCapabilities" in missing["error"]["message"]
    # A handshake connection refuses an enveloped request.
    _, enveloped = run(request(1, "initialize", protocolVersion="2025-11-25"), request(2, "ping", _meta=MODERN_META))
    assert enveloped["error"]["code"] == -32600


def test_malformed_input_is_answered_and_the_rest_still_served() -> None:
    answers = run("not json", {"jsonrpc": "2.0", "id": [1], "method": "ping"}, {"id": 5, "method": "ping"},
                  request(6, "resources/list"), request(7, "tools/call", name=3), [request(8, "ping"),
                                                                                    request(9, "ping")])
    outcomes = sorted(((str(a["id"]), a["error"]["code"] if "error" in a else a["result"]) for a in answers), key=str)
    # tools/call is answered from a worker thread, so its answer may come later: compare by id.
    assert outcomes == sorted([("None", -32700), ("None", -32600), ("5", -32600), ("6", -32601), ("7", -32602),
                               ("8", {}), ("9", {})], key=str)


def test_a_cancelled_call_gets_no_answer() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        started.set()
        release.wait(30)
        return False, {}

    out = io.BytesIO()
    proxy = StdioProxy(TOOLS, slow, lambda: {"echo"}, out)
    proxy.receive(json.dumps(request(1, "initialize", protocolVersion="2025-11-25")).encode())
    proxy.receive(json.dumps(request(2, "tools/call", name="echo", arguments={})).encode())
    assert started.wait(30)
    proxy.receive(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": 2}}).encode())
    release.set()
    proxy.serve(io.BytesIO(b""))  # waits for the running call
    assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == [1]
