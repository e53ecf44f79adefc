"""The catalog's face index: what the CLI and the stdio MCP proxy need of every operation, as plain JSON."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from pydantic.fields import FieldInfo

from instantstart.catalog.groups import group_description
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.schema import arguments_schema
from instantstart.catalog.secret import is_secret_annotation

SECRET, FLAG, JSON_VALUE, TEXT = "secret", "flag", "json", "text"


def _is_bool(info: FieldInfo) -> bool:
    ann = info.annotation
    return ann is bool or (
        get_origin(ann) is not None and bool in get_args(ann) and all(a in (bool, type(None)) for a in get_args(ann))
    )


def _is_structured(info: FieldInfo) -> bool:
    ann = info.annotation
    origin = get_origin(ann)
    candidates = get_args(ann) if origin is not None else (ann,)
    for candidate in candidates:
        if get_origin(candidate) in (list, dict) or candidate in (list, dict):
            return True
        if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
            return True
    return False


def option_kind(info: FieldInfo) -> str:
    """How the CLI takes a field: a secret (from its environment variable), a flag, JSON, or text."""
    if is_secret_annotation(info.annotation):
        return SECRET
    if _is_bool(info):
        return FLAG
    return JSON_VALUE if _is_structured(info) else TEXT


def tool_annotations(spec: OperationSpec) -> dict[str, bool]:
    """The MCP tool annotations of an operation (its behaviour class)."""
    return {
        "readOnlyHint": spec.read_only,
        "destructiveHint": spec.destructive,
        "idempotentHint": spec.idempotent,
        "openWorldHint": spec.open_world,
    }


def tool_entry(spec: OperationSpec) -> dict[str, Any]:
    """The operation's MCP tool as JSON: name, description, arguments' schema and behaviour annotations."""
    return {
        "name": spec.name,
        "description": spec.tool_description,
        "inputSchema": arguments_schema(spec.input_model),
        "annotations": tool_annotations(spec),
    }


def operation_entry(spec: OperationSpec) -> dict[str, Any]:
    """One operation as the faces outside the server see it: its command, options and MCP tool."""
    return {
        "name": spec.name,
        "group": spec.cli_group,
        "command": spec.cli_command,
        "summary": spec.summary,
        "mutating": spec.mutating,
        "options": [
            {"field": name, "wire": info.alias or name, "help": info.description or "", "kind": option_kind(info)}
            for name, info in spec.input_model.model_fields.items()
        ],
        "tool": tool_entry(spec),
    }


def build_index(catalog: Catalog) -> dict[str, Any]:
    """The index of `catalog`: its command groups' help and every operation's entry, sorted by name."""
    operations = [operation_entry(spec) for spec in catalog]
    groups = sorted({entry["group"] for entry in operations})
    return {
        "groups": {group: group_description(group) for group in groups},
        "operations": operations,
    }
