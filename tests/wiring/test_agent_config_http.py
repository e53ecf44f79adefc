"""`instantstart agent-config --url`: each client's streamable-HTTP entry, and a client using it lists the tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from instantstart.catalog import CATALOG
from instantstart.cli.agent_config import write_config
from instantstart.cli.main import build_app
from instantstart.settings import Settings
from tests.support.servers import SSL_CONTEXT, Running

URL = "https://instantstart.internal:3099/mcp"


def expand(value: str, env: dict[str, str]) -> str:
    """What Claude Code and Kiro do to a header value at start: `${VAR}` becomes the variable's value."""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env[m.group(1)], value)


def entries(target: str, root: Path) -> list[dict[str, Any]]:
    """Every hypd-inst server entry the target wrote, in each file a client reads."""
    files = {
        "claude-code": [".mcp.json"],
        "mcp-json": [".mcp.json"],
        "kiro": [".kiro/settings/mcp.json", ".kiro/agents/hypd-inst-agent.json"],
    }[target]
    return [json.loads((root / name).read_text())["mcpServers"]["hypd-inst"] for name in files]


@pytest.mark.parametrize("target", ["kiro", "claude-code", "mcp-json"])
def test_url_option_writes_each_clients_http_entry_with_the_token_from_the_environment(
    target: str, tmp_path: Path
) -> None:
    secret = "tok-must-never-be-written"
    result = CliRunner().invoke(
        build_app(Settings(data_dir=tmp_path / "d")),
        ["agent-config", target, "--dir", str(tmp_path / "p"), "--url", URL, "--token-env", "HYPD_TOKEN"],
        env={"HYPD_TOKEN": secret},
    )
    assert result.exit_code == 0, result.output
    for entry in entries(target, tmp_path / "p"):
        headers = {"Authorization": "Bearer ${HYPD_TOKEN}"}
        if target == "kiro":  # Kiro infers a remote server from `url`; it has no `type` key
            assert entry == {"url": URL, "headers": headers}
        else:
            assert entry == {"type": "http", "url": URL, "headers": headers}
    written = "".join(p.read_text() for p in (tmp_path / "p").rglob("*") if p.is_file())
    assert secret not in written and '"command"' not in written


def test_without_url_the_kiro_target_keeps_the_local_command_and_writes_no_settings_file(tmp_path: Path) -> None:
    write_config("kiro", tmp_path, CATALOG)
    agent = json.loads((tmp_path / ".kiro/agents/hypd-inst-agent.json").read_text())
    assert agent["mcpServers"]["hypd-inst"] == {"command": "instantstart", "args": ["mcp"]}
    assert not (tmp_path / ".kiro/settings/mcp.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "file:///etc/passwd"], "--url must be the server's MCP endpoint"),
        (["--url", URL, "--token-env", "TOKEN; rm -rf /"], "--token-env must be an environment variable name"),
    ],
)
def test_a_bad_url_or_variable_name_is_refused_and_nothing_is_written(
    args: list[str], message: str, tmp_path: Path
) -> None:
    argv = ["agent-config", "claude-code", "--dir", str(tmp_path / "p"), *args]
    result = CliRunner().invoke(build_app(Settings(data_dir=tmp_path / "d")), argv)
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("target", ["kiro", "claude-code"])
async def test_a_client_using_the_written_url_and_header_lists_the_tools(
    target: str, server: Running, tmp_path: Path
) -> None:
    write_config(target, tmp_path, CATALOG, url=server.url + "/mcp", token_env="INSTANTSTART_TOKEN")
    entry = entries(target, tmp_path)[0]
    headers = {k: expand(v, {"INSTANTSTART_TOKEN": server.token}) for k, v in entry["headers"].items()}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), verify=SSL_CONTEXT) as http,
        streamable_http_client(entry["url"], http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
    assert tools == {spec.name for spec in CATALOG}
