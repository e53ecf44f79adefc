"""Agent skills shipped with the package: `<name>/SKILL.md` (front matter, procedure) and `<name>/scenario.yaml`.

The repository's `skills/` is a link to this folder, so a pip install carries the same files that
`instantstart agent-config` writes out and the skill evals replay.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SKILLS_DIR = Path(__file__).resolve().parent
_FRONT = re.compile(r"\A---\n(.*?)\n---\n(.*)\Z", re.S)
# A backticked snake_case word with at least one underscore is a tool name in a skill's text.
_TOOL = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")
_EXAMPLE = re.compile(r"```json\n(.*?)\n```", re.S)


@dataclass(frozen=True)
class Skill:
    """One skill: its front matter, its body and where it lives."""

    name: str
    description: str
    body: str
    path: Path

    @property
    def text(self) -> str:
        """The whole SKILL.md."""
        return self.path.read_text()

    def tool_names(self) -> set[str]:
        """Every tool the skill names."""
        return set(_TOOL.findall(self.body))

    def example_calls(self) -> list[dict[str, Any]]:
        """The example calls in ```json blocks: {"tool": name, "arguments": {...}}."""
        calls = []
        for block in _EXAMPLE.findall(self.body):
            value = json.loads(block)
            if not isinstance(value, dict) or "tool" not in value:
                raise ValueError(f"{self.path}: a json block is not an example call {{tool, arguments}}")
            calls.append(value)
        return calls

    def scenario(self) -> dict[str, Any]:
        """The scenario the skill ships (its prescribed tool calls for one concrete request, as data)."""
        data: dict[str, Any] = yaml.safe_load((self.path.parent / "scenario.yaml").read_text())
        return data


def load_skill(path: Path) -> Skill:
    """Parse one SKILL.md; its front matter must name the skill and say when to use it."""
    match = _FRONT.match(path.read_text())
    if match is None:
        raise ValueError(f"{path}: no front matter (--- name/description ---)")
    meta = yaml.safe_load(match.group(1)) or {}
    name, description = meta.get("name"), meta.get("description")
    if name != path.parent.name or not description:
        raise ValueError(f"{path}: front matter needs name: {path.parent.name} and a description")
    return Skill(name=str(name), description=str(description), body=match.group(2), path=path)


def all_skills(root: Path = SKILLS_DIR) -> list[Skill]:
    """Every skill under `root`, by name."""
    return [load_skill(p) for p in sorted(root.glob("*/SKILL.md"))]
