"""`instantstart agent-config`: agent configurations generated from the catalog and the shipped skills."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from instantstart.catalog.registry import READ_ONLY, Catalog
from instantstart.mcp.wire import SERVER_NAME
from instantstart.skills import all_skills

AGENT_NAME = "hypd-inst-agent"
TARGETS = ("kiro", "claude-code", "mcp-json")
PROMPT = (
    "You operate Amazon SageMaker HyperPod clusters on Amazon EKS through the hypd-inst MCP server. Follow the"
    " skill that matches the request. Inspect with read-only tools before offering choices; ask only"
    " decision-grade questions; confirm before any change; poll every operation with wait_seconds and its"
    " status tool until it is terminal; resume failed work with operation_retry instead of starting over."
)


TOKEN_ENV = "INSTANTSTART_TOKEN"  # the NAME of the variable holding the API token, never the token
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def server_entry(command: str) -> dict[str, Any]:
    """The MCP server as a stdio command (`instantstart mcp` forwards every call to the running server)."""
    return {"command": command, "args": ["mcp"]}


def http_entry(kind: str, url: str, token_env: str) -> dict[str, Any]:
    """The MCP server as a streamable-HTTP entry whose bearer token the client reads from `token_env` at start.

    Claude Code (.mcp.json) names the transport (`"type": "http"`); Kiro (.kiro/settings/mcp.json and agent files)
    infers it from `url`. Both expand `${VAR}` in headers, so the token itself is never written to a file.
    """
    if not url.startswith(("https://", "http://")) or any(c.isspace() for c in url):
        raise ValueError(f"--url must be the server's MCP endpoint, e.g. https://host:3099/mcp, not {url!r}")
    if not ENV_NAME.fullmatch(token_env):
        raise ValueError(f"--token-env must be an environment variable name, e.g. {TOKEN_ENV}, not {token_env!r}")
    entry: dict[str, Any] = {"url": url, "headers": {"Authorization": f"Bearer ${{{token_env}}}"}}
    return {"type": "http", **entry} if kind != "kiro" else entry


def auto_approved(catalog: Catalog) -> list[str]:
    """Tools an agent may call without asking: read-only ones only, never a side-effecting (it calls a model, a
    billed endpoint: the prompt leaves the control plane), destructive or mutating one."""
    return [spec.name for spec in catalog if spec.behaviour == READ_ONLY and not spec.destructive]


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _copy_skills(target: Path) -> list[Path]:
    written = []
    for skill in all_skills():
        dest = target / skill.name / "SKILL.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(skill.path, dest)
        written.append(dest)
    return written


def write_config(
    kind: str,
    root: Path,
    catalog: Catalog,
    command: str = "instantstart",
    url: str | None = None,
    token_env: str = TOKEN_ENV,
) -> list[Path]:
    """Write the configuration `kind` under `root`; returns the files written.

    Without `url` the agent starts `command mcp` locally (stdio proxy); with `url` it connects straight to a running
    server's /mcp over streamable HTTP, sending `Authorization: Bearer ${token_env}` (nothing to install locally).
    """
    if kind not in TARGETS:
        raise ValueError(f"agent-config target must be one of {', '.join(TARGETS)}, not {kind!r}")
    entry = http_entry(kind, url, token_env) if url else server_entry(command)
    mcp_json = {"mcpServers": {SERVER_NAME: entry}}
    if kind == "mcp-json":
        return [_write(root / ".mcp.json", mcp_json)]
    if kind == "claude-code":
        skills = _copy_skills(root / ".claude" / "skills")
        settings = {
            "enabledMcpjsonServers": [SERVER_NAME],
            "permissions": {"allow": [f"mcp__{SERVER_NAME}__{name}" for name in auto_approved(catalog)]},
        }
        return [_write(root / ".mcp.json", mcp_json), _write(root / ".claude" / "settings.json", settings), *skills]
    skills = _copy_skills(root / ".kiro" / "skills")
    agent = {
        "name": AGENT_NAME,
        "description": "Creates, scales and diagnoses SageMaker HyperPod clusters on EKS through InstantStart.",
        "prompt": PROMPT,
        "mcpServers": {SERVER_NAME: entry},
        "tools": [f"@{SERVER_NAME}"],
        "allowedTools": [f"@{SERVER_NAME}/{name}" for name in auto_approved(catalog)],
        "resources": [f"file://.kiro/skills/{p.parent.name}/SKILL.md" for p in skills],
    }
    written = [_write(root / ".kiro" / "agents" / f"{AGENT_NAME}.json", agent)]
    if url:  # the Kiro IDE reads remote servers from the workspace settings file, not from agent files
        written.append(_write(root / ".kiro" / "settings" / "mcp.json", mcp_json))
    return [*written, *skills]
