"""Scenario checks (static) and replay (over an MCP client session) for the skills' scenario files."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema

from instantstart.catalog import CATALOG
from instantstart.catalog.schema import arguments_schema

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
_DOT = re.compile(r"(?<!\\)\.")
_VAR = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}")


class ScenarioError(AssertionError):
    """A scenario that does not hold, with the step that broke it."""


def where(skill: str, part: str, index: int, step: dict[str, Any]) -> str:
    """How a message names a step."""
    what = step.get("call") or step.get("poll") or ("approval" if "approval" in step else "twin")
    return f"skill {skill}, {part} step {index + 1} ({what})"


def check_call(skill: str, part: str, index: int, step: dict[str, Any]) -> None:
    """The tool exists and the arguments validate against its input schema (variables stand in as strings)."""
    tool = step.get("call") or step.get("poll")
    spec = CATALOG.get(str(tool))
    if spec is None:
        raise ScenarioError(f"{where(skill, part, index, step)}: no tool named {tool!r}")
    args = step.get("args") or {}
    schema = arguments_schema(spec.input_model)
    # A `${name}` value is filled in at replay time: only its parameter name is checked statically.
    for key, value in args.items():
        if isinstance(value, str) and _VAR.fullmatch(value) and key in schema.get("properties", {}):
            schema["properties"][key] = {}
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(args), key=str)
    if errors:
        detail = "; ".join(e.message for e in errors)
        raise ScenarioError(f"{where(skill, part, index, step)}: arguments do not match {tool} schema: {detail}")


def check_scenario(skill: str, scenario: dict[str, Any], *, diagnostic: bool) -> None:
    """Static checks: every call names a tool and validates; a diagnostic scenario calls only read-only tools
    before its first approval point, and has one."""
    for part in ("setup", "steps"):
        for index, step in enumerate(scenario.get(part) or []):
            if "call" in step or "poll" in step:
                check_call(skill, part, index, step)
    steps = scenario.get("steps") or []
    approvals = [i for i, s in enumerate(steps) if "approval" in s]
    if not approvals:
        raise ScenarioError(f"skill {skill}: the scenario has no approval point before its first change")
    if not any("call" in s or "poll" in s for s in steps[approvals[-1] + 1 :]):
        raise ScenarioError(
            f"skill {skill}: the scenario stops at its approval point; replay the approved step and verify its result"
        )
    for index, step in enumerate(steps[: approvals[0]]):
        tool = step.get("call") or step.get("poll")
        if tool is None:
            continue
        spec = CATALOG.get(str(tool))
        if diagnostic and spec is not None and not spec.read_only:
            raise ScenarioError(
                f"{where(skill, 'steps', index, step)}: {tool} changes state before the approval point; a diagnostic "
                "skill investigates read-only first"
            )
        if spec is not None and spec.destructive:
            raise ScenarioError(f"{where(skill, 'steps', index, step)}: destructive {tool} before the approval point")


def lookup(payload: Any, path: str) -> Any:
    """A value by dotted path (`\\.` is a dot inside a segment); `key=value` picks the first list item whose key
    equals value."""
    value = payload
    for segment in (p.replace("\\.", ".") for p in _DOT.split(str(path))):
        if isinstance(value, list):
            if "=" in segment:
                key, _, wanted = segment.partition("=")
                value = next((item for item in value if str(item.get(key)) == wanted), None)
            else:
                value = value[int(segment)] if int(segment) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(segment)
        else:
            return None
    return value


def substitute(value: Any, saved: dict[str, Any]) -> Any:
    """`${name}` replaced by what an earlier step saved."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return saved[whole.group(1)]
        return _VAR.sub(lambda m: str(saved[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    return value


def is_terminal(payload: dict[str, Any]) -> bool:
    """What the poll-to-terminal rule stops on."""
    return payload.get("terminal") is True or payload.get("status") in TERMINAL


class Replay:
    """Runs a scenario's steps over an MCP session, recording every tool called."""

    def __init__(self, session: Any, twin_url: str, *, max_polls: int = 400, wait: int = 1) -> None:
        self.session = session
        self.twin_url = twin_url
        self.max_polls = max_polls
        self.wait = wait
        self.saved: dict[str, Any] = {}
        self.called: list[str] = []

    async def tool(self, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        result = await self.session.call_tool(name, args)
        self.called.append(name)
        payload: dict[str, Any] = json.loads(result.content[0].text)
        return bool(result.is_error), payload

    async def run(self, skill: str, part: str, steps: list[dict[str, Any]]) -> None:
        for index, step in enumerate(steps):
            label = where(skill, part, index, step)
            if "approval" in step:
                continue
            if "twin" in step:
                t = step["twin"]
                httpx.request(t["method"], self.twin_url + t["path"], json=t.get("body"), timeout=30).raise_for_status()
                continue
            args = substitute(dict(step.get("args") or {}), self.saved)
            if "call" in step:
                failed, payload = await self.tool(step["call"], args)
                if failed:
                    raise ScenarioError(f"{label}: the tool refused: {payload}")
                if "operationId" in payload:
                    self.saved["operation"] = payload["operationId"]  # `${operation}`: the latest operation
            else:
                payload = await self.poll(label, step["poll"], args, step.get("until"))
            for key, unwanted in substitute(step.get("differs") or {}, self.saved).items():
                if lookup(payload, key) == unwanted:
                    raise ScenarioError(f"{label}: {key} is still {unwanted!r}, the skill expects a change: {payload}")
            for key, expected in substitute(step.get("expect") or {}, self.saved).items():
                actual = lookup(payload, key)
                if actual != expected:
                    raise ScenarioError(f"{label}: {key} is {actual!r}, the skill expects {expected!r}: {payload}")
            for key in step.get("present") or []:
                if lookup(payload, key) in (None, "", [], {}):
                    raise ScenarioError(f"{label}: nothing at {key}, the skill expects a value there: {payload}")
            for name, path in (step.get("save") or {}).items():
                value = lookup(payload, path)
                if value is None:
                    raise ScenarioError(f"{label}: nothing at {path} to save as {name}: {payload}")
                self.saved[name] = value

    async def poll(
        self, label: str, tool: str, args: dict[str, Any], until: dict[str, list[Any]] | None = None
    ) -> dict[str, Any]:
        """The status tool, with wait_seconds in between, until terminal (never stopping early); `until`
        ({path: [values]}) states the terminal values of a status tool without `terminal`/`status`."""
        payload: dict[str, Any] = {}
        for _ in range(self.max_polls):
            failed, payload = await self.tool(tool, args)
            if failed:
                raise ScenarioError(f"{label}: the status tool refused: {payload}")
            done = (
                any(lookup(payload, path) in values for path, values in until.items())
                if until
                else is_terminal(payload)
            )
            if done:
                return payload
            await self.tool("wait_seconds", {"seconds": self.wait})
        raise ScenarioError(f"{label}: {tool} never reached a terminal state: {payload}")
