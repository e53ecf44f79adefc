"""`instantstart agent-config`: agent configurations generated from the catalog and the shipped skills."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from instantstart.catalog.registry import READ_ONLY, Catalog
from instantstart.mcp.tools import SERVER_NAME
from instantstart.skills import all_skills

AGENT_NAME = "hypd-inst-agent"
TARGETS = ("kiro", "claude-code", "mcp-json")
PROMPT = (
    "You operate Amazon SageMaker HyperPod clusters on Amazon EKS through the hypd-inst MCP server. Follow the"
    " skill that matches the request. Inspect with read-only tools before offering choices; ask only"
    " decision-grade questions; confirm before any change; poll every operation with wait_seconds and its"
    " status tool until it is terminal; resume failed work with operation_retry instead of starting over."
)


def server_entry(command: str) -> dict[str, Any]:
    """The MCP server as a stdio command (`instantstart mcp` forwards every call to the running server)."""
    return {"command": command, "args": ["mcp"]}


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


def write_config(kind: str, root: Path, catalog: Catalog, command: str = "instantstart") -> list[Path]:
    """Write the configuration `kind` under `root`; returns the files written."""
    if kind not in TARGETS:
        raise ValueError(f"agent-config target must be one of {', '.join(TARGETS)}, not {kind!r}")
    mcp_json = {"mcpServers": {SERVER_NAME: server_entry(command)}}
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
        "mcpServers": {SERVER_NAME: server_entry(command)},
        "tools": [f"@{SERVER_NAME}"],
        "allowedTools": [f"@{SERVER_NAME}/{name}" for name in auto_approved(catalog)],
        "resources": [f"file://.kiro/skills/{p.parent.name}/SKILL.md" for p in skills],
    }
    return [_write(root / ".kiro" / "agents" / f"{AGENT_NAME}.json", agent), *skills]
