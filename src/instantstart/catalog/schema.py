"""The JSON Schema of an operation's arguments, shared by the MCP tools and the OpenAPI request bodies."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import AliasChoices

from instantstart.catalog.base import WireModel

CLIENT_TOKEN_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z0-9._:\\-]{1,200}$",
    "description": "Idempotency key: the same value returns the same operation on retry.",
}


def alias_names(model: type[WireModel]) -> dict[str, list[str]]:
    """Wire name → the other accepted names (legacy spellings such as `AcceleratedInstanceType`).

    The snake_case field names every model accepts are not listed: they are a Python convenience, not
    names agents use.
    """
    found: dict[str, list[str]] = {}
    for name, info in model.model_fields.items():
        choices = info.validation_alias
        if not isinstance(choices, AliasChoices):
            continue
        names = [c for c in choices.choices if isinstance(c, str)]
        if not names:
            continue
        primary, others = names[0], [c for c in names[1:] if c != name]
        if others:
            found[primary] = others
    return found


def arguments_schema(model: type[WireModel], *, ref_template: str | None = None) -> dict[str, Any]:
    """The arguments' JSON Schema: the model's camelCase fields, each legacy alias as a property of its
    own, and the optional clientToken; nothing else is accepted.

    A required field that has aliases is left out of `required` (its description says so): a client
    that sends only the alias must pass schema validation, and the server still refuses a call that
    gives neither name, naming the field.
    """
    kwargs: dict[str, Any] = {"by_alias": True, "mode": "validation"}
    if ref_template is not None:
        kwargs["ref_template"] = ref_template
    schema = model.model_json_schema(**kwargs)
    props: dict[str, Any] = schema.setdefault("properties", {})
    required: list[str] = list(schema.get("required", []))
    for primary, others in alias_names(model).items():
        prop = props.get(primary)
        if prop is None:
            continue
        is_required = primary in required
        note = f"Also accepted as {', '.join(others)}." + (" One of these names is required." if is_required else "")
        prop["description"] = f"{prop.get('description', '').rstrip()} {note}".strip()
        for other in others:
            alias_prop = copy.deepcopy(prop)
            alias_prop["description"] = f"Alias of {primary} (the legacy name); send one of them."
            alias_prop.pop("title", None)
            alias_prop.pop("default", None)
            props[other] = alias_prop
        if is_required:
            required.remove(primary)
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    props["clientToken"] = dict(CLIENT_TOKEN_SCHEMA)
    schema["additionalProperties"] = False
    schema.pop("title", None)
    return schema
