"""Calling one operation through each face: REST resource route, REST tool route, MCP (HTTP, stdio), CLI."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import typer.main
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from instantstart.catalog.registry import OperationSpec
from instantstart.cli.commands import kebab
from instantstart.cli.main import build_app
from instantstart.settings import Settings
from tests.support.servers import CHILD_PYTHONPATH, REPO, SSL_CONTEXT, Running


def strip_volatile(payload: dict[str, Any]) -> dict[str, Any]:
    """Drop what legitimately differs per request (the request id)."""
    if "error" in payload:
        error = dict(payload["error"])
        error["details"] = {k: v for k, v in (error.get("details") or {}).items() if k != "requestId"}
        return {"error": error}
    return payload


def call_rest(running: Running, spec: OperationSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Through the operation's own REST route."""
    path = spec.path
    rest = dict(args)
    for name in spec.path_params:
        path = path.replace("{" + name + "}", str(rest.pop(name)))
    with running.client() as client:
        if spec.method == "GET":
            params = {k: json.dumps(v) if isinstance(v, dict | list) else str(v) for k, v in rest.items()}
            response = client.get("/api/v1" + path, params=params)
        else:
            response = client.request(spec.method, "/api/v1" + path, json=rest)
    body: dict[str, Any] = response.json()
    return strip_volatile(body)


def call_tool_route(running: Running, spec: OperationSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Through POST /api/v1/tools/{name} (what the CLI and the stdio proxy use)."""
    with running.client() as client:
        body: dict[str, Any] = client.post(f"/api/v1/tools/{spec.name}", json=args).json()
    return strip_volatile(body)


def cli_args(spec: OperationSpec, args: dict[str, Any]) -> list[str]:
    """The CLI command line for `args`."""
    argv = [spec.cli_group, spec.cli_command, "-o", "json"]
    for key, value in args.items():
        if key == "clientToken":
            argv += ["--client-token", str(value)]
        elif isinstance(value, bool):
            argv.append(f"--{kebab(key)}" if value else f"--no-{kebab(key)}")
        elif isinstance(value, dict | list):
            argv += [f"--{kebab(key)}", json.dumps(value)]
        else:
            argv += [f"--{kebab(key)}", str(value)]
    return argv


@functools.lru_cache(maxsize=4)
def cli_command(data_dir: Path, server_url: str) -> Any:
    """The `instantstart` CLI's Click command for one server, built once: building it (the Typer app, then its
    Click command: one per catalog operation) took ~0.3 s, and the faces test calls the CLI ~160 times."""
    settings = Settings(data_dir=data_dir, server_url=server_url, plugins=["tests.support.probe_ops"])
    return typer.main.get_command(build_app(settings))


def call_cli(running: Running, spec: OperationSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Through the `instantstart` CLI (in-process, in the Click runner's isolated streams; real HTTP to the
    server)."""
    command = cli_command(running.data_dir, running.url)
    runner = CliRunner()
    with runner.isolation() as (stdout, stderr, _output):
        try:
            command.main(args=cli_args(spec, args), prog_name=runner.get_default_prog_name(command))
            exit_code = 0
        except SystemExit as exc:
            exit_code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()  # the runner's text wrappers over its byte streams
        sys.stderr.flush()
        text = (stdout if exit_code == 0 else stderr).getvalue().decode(runner.charset, "replace")
    payload: dict[str, Any] = json.loads(text)
    return strip_volatile(payload)


def tool_payload(result: Any) -> dict[str, Any]:
    """The JSON payload of an MCP tool result (checked to match its structured content)."""
    text = result.content[0].text
    payload: dict[str, Any] = json.loads(text)
    assert result.structured_content == payload
    assert bool(result.is_error) == ("error" in payload and set(payload) == {"error"})
    return strip_volatile(payload)


@asynccontextmanager
async def mcp_http_raw(running: Running) -> AsyncIterator[ClientSession]:
    """An MCP client session over streamable HTTP at /mcp carrying the bearer token, not yet initialized."""
    headers = {"Authorization": f"Bearer {running.token}"}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, verify=SSL_CONTEXT) as http,
        streamable_http_client(running.url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


@asynccontextmanager
async def mcp_http(running: Running) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over streamable HTTP at /mcp."""
    async with mcp_http_raw(running) as session:
        await session.initialize()
        yield session


def stdio_params(running: Running) -> StdioServerParameters:
    """How to launch `instantstart mcp` against the running server."""
    env = running.env()
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    return StdioServerParameters(
        command=sys.executable, args=["-m", "instantstart.cli.main", "mcp"], env=env, cwd=str(REPO)
    )


@asynccontextmanager
async def mcp_stdio(running: Running) -> AsyncIterator[ClientSession]:
    """An MCP client session over `instantstart mcp` (stdio proxy to REST), after the initialize handshake."""
    async with stdio_client(stdio_params(running)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def mcp_client_http(running: Running) -> AsyncIterator[Client]:
    """The SDK's high-level client over streamable HTTP at /mcp, negotiating as it does by default."""
    headers = {"Authorization": f"Bearer {running.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), verify=SSL_CONTEXT) as http,
        Client(streamable_http_client(running.url + "/mcp", http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def mcp_client_stdio(running: Running) -> AsyncIterator[Client]:
    """The SDK's high-level client over `instantstart mcp`, negotiating as it does by default."""
    async with Client(stdio_params(running)) as client:
        yield client


def unauthenticated(running: Running) -> httpx.Client:
    """A client without the token."""
    return httpx.Client(base_url=running.url, timeout=30, verify=SSL_CONTEXT)
