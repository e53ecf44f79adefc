"""`instantstart mcp`: an MCP server over stdio that forwards every tool call to the REST API.

It speaks the protocol itself with the standard library only (JSON-RPC 2.0, one message a line), in the era the
client's first request opens: the initialize handshake of the revisions 2024-11-05 to 2025-11-25, or the 2026-07-28
revision's per-request envelope (`server/discover`, the version and client capabilities in every request's
`_meta`), answered as the MCP SDK answers them. its tools come from the catalog index
(data/catalog_index.json) and its calls go out over the standard library's HTTP client, one worker thread each. So
an agent that starts it has the tool list in a tenth of a second, where the MCP SDK alone took half a second to
import. The in-process server at /mcp keeps using the SDK; both say the same (mcp/wire.py), which the faces tests
check by driving this proxy with the SDK's own clients.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from instantstart import __version__, catalog_index
from instantstart.client import RestClient
from instantstart.client_config import ClientConfig
from instantstart.mcp.wire import INSTRUCTIONS, SERVER_NAME, unknown_tool

# The revisions negotiated by the initialize handshake (the MCP specification's dated revisions, oldest first), and
# those whose every request carries its own envelope instead.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
# JSON-RPC 2.0 error codes, and MCP's for a protocol version the server does not serve.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
UNSUPPORTED_VERSION = -32022
WORKERS = 8  # tool calls served at once; a call waits on the server for up to its wait_seconds

NamedCall = Callable[[str, dict[str, Any]], tuple[bool, dict[str, Any]]]
Visible = Callable[[], set[str]]
Message = dict[str, Any]


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class StdioProxy:
    """The MCP server's methods over a list of tools (catalog index entries), each call forwarded by name."""

    def __init__(self, tools: list[dict[str, Any]], call: NamedCall, visible: Visible, out: IO[bytes]) -> None:
        self.tools = tools
        self.names = {tool["name"] for tool in tools}
        self.call = call
        self.visible = visible
        self.out = out
        self._write_lock = threading.Lock()
        self._running: set[str | int] = set()  # ids of the requests being answered
        self._cancelled: set[str | int] = set()  # and those of them the client cancelled
        self._ids_lock = threading.Lock()
        self.modern: bool | None = None  # the era, decided by the first request
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="mcp-call")

    def serve(self, source: IO[bytes]) -> None:
        """Answer every message read from `source` until it closes; calls still running are waited for."""
        try:
            for line in source:
                if line.strip():
                    self.receive(line)
        finally:
            self._pool.shutdown(wait=True)

    def receive(self, line: bytes) -> None:
        """One line: a message (or, in the 2025-03-26 revision, a batch of them)."""
        try:
            message = json.loads(line)
        except ValueError:
            self._write(error_answer(None, RpcError(PARSE_ERROR, "Parse error: not JSON")))
            return
        for item in message if isinstance(message, list) and message else [message]:
            self._dispatch(item)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(
            message.get("method"), str
        ):
            if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
                return  # an answer to a request of ours: this server sends none
            self._write(error_answer(_id_of(message), RpcError(INVALID_REQUEST, "Invalid request")))
            return
        if "id" not in message:
            self._notified(message)
            return
        if _id_of(message) is None:
            self._write(error_answer(None, RpcError(INVALID_REQUEST, "Invalid request: id must be a string or number")))
            return
        if self.modern is None:  # the first request opens the connection's era, once
            self.modern = message["method"] != "initialize" and _enveloped(message.get("params"))
        if message["method"] in ("tools/call", "tools/list"):  # these wait on the server: off the reading thread
            self._pool.submit(self._answer, message)
        else:
            self._answer(message)

    def _notified(self, message: Message) -> None:
        if message["method"] == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            with self._ids_lock:
                if isinstance(request_id, (str, int)) and request_id in self._running:
                    self._cancelled.add(request_id)
        # notifications/initialized and the rest need nothing from a tools-only server

    def _answer(self, message: Message) -> None:
        request_id = message["id"]
        with self._ids_lock:
            self._running.add(request_id)
        try:
            answer: Message = {"jsonrpc": "2.0", "id": request_id, "result": self.handle(message)}
        except RpcError as exc:
            answer = error_answer(request_id, exc)
        with self._ids_lock:
            self._running.discard(request_id)
            if request_id in self._cancelled:  # cancelled meanwhile: the client expects no answer
                self._cancelled.discard(request_id)
                return
        self._write(answer)

    def handle(self, message: Message) -> dict[str, Any]:
        """The result of one request, or RpcError."""
        method, params = message["method"], message.get("params") or {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "params must be an object")
        if not self.modern:
            if _enveloped(params):
                raise RpcError(INVALID_REQUEST, "This connection did the initialize handshake: requests carry no "
                               f"{VERSION_KEY} envelope")
            return self.result(method, params)
        check_envelope(method, params)
        result = self.result(method, params) | {"resultType": "complete", "_meta": {SERVER_INFO_KEY: server_info()}}
        return result | {"ttlMs": 0, "cacheScope": "private"} if method in ("server/discover", "tools/list") else result

    def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of a method, whatever the era."""
        if method == "initialize":
            return initialize_result(params)
        if method == "server/discover" and self.modern:
            return {"supportedVersions": list(MODERN_VERSIONS), "capabilities": CAPABILITIES,
                    "instructions": INSTRUCTIONS}
        if method == "ping":
            return {}
        if method == "tools/list":
            allowed = self.visible()
            return {"tools": [tool for tool in self.tools if tool["name"] in allowed]}
        if method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if not isinstance(name, str) or not isinstance(args, dict):
                raise RpcError(INVALID_PARAMS, "tools/call needs a tool name and an arguments object")
            is_error, payload = self.call(name, args) if name in self.names else unknown_tool(name)
            return tool_result(is_error, payload)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _write(self, answer: Message) -> None:
        data = json.dumps(answer, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self.out.write(data)
            self.out.flush()


CAPABILITIES = {"tools": {"listChanged": False}}


def server_info() -> dict[str, str]:
    """The server's name and version."""
    return {"name": SERVER_NAME, "version": __version__}


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    """The handshake's answer: the client's revision when this server speaks it, else the newest one it does."""
    asked = params.get("protocolVersion")
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": server_info(),
            "instructions": INSTRUCTIONS}


def check_envelope(method: str, params: dict[str, Any]) -> None:
    """Refuse a request of a 2026-07-28 connection without a served version and the client's capabilities."""
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    asked = meta.get(VERSION_KEY)
    if method == "initialize" or asked not in MODERN_VERSIONS:
        why = "the initialize handshake is not accepted" if method == "initialize" else "Unsupported protocol version"
        requested = params.get("protocolVersion") if method == "initialize" else asked
        raise RpcError(UNSUPPORTED_VERSION, f"This connection serves the {MODERN_VERSIONS[-1]} protocol: {why}",
                       {"supported": list(MODERN_VERSIONS), "requested": requested})
    if CAPABILITIES_KEY not in meta:
        raise RpcError(INVALID_PARAMS, f"params._meta is missing the required envelope key(s): {CAPABILITIES_KEY}")


def _enveloped(params: Any) -> bool:
    """Whether a request carries the 2026-07-28 envelope (its protocol version in params._meta)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_KEY in meta


def tool_result(is_error: bool, payload: dict[str, Any]) -> dict[str, Any]:
    """A tool result carrying the same JSON the REST API returns (as text and as structured content)."""
    return {
        "content": [{"type": "text", "text": json.dumps(payload, separators=(",", ":"))}],
        "structuredContent": payload,
        "isError": is_error,
    }


def error_answer(request_id: Any, exc: RpcError) -> Message:
    """A JSON-RPC error answer."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _id_of(message: Any) -> Any:
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


def run(config: ClientConfig, server_url: str | None = None, token: str | None = None) -> None:
    """Serve the catalog's tools on stdin/stdout until stdin closes, each call becoming one REST request."""
    client = RestClient(config, server_url, token, face="mcp")
    tools = [entry["tool"] for entry in catalog_index.load(config.plugins)["operations"]]
    StdioProxy(tools, client.call, client.allowed, sys.stdout.buffer).serve(sys.stdin.buffer)
