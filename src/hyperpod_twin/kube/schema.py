"""OpenAPI v3 validation and defaulting of custom resources, as kube-apiserver does it for CRDs.

A write of a custom resource is checked against its CRD version's structural schema: type
(`x-kubernetes-int-or-string`, `nullable`), `enum`, `required`, `minimum`/`maximum` (and the
exclusive forms), `minLength`/`maxLength`, `pattern` (unanchored, as Go's regexp.MatchString),
`minItems`/`maxItems`, `minProperties`/`maxProperties`, `uniqueItems`, and `allOf`/`anyOf`/`oneOf`/
`not`. Every violation becomes one cause of a 422 `Invalid` Status worded as the apiserver words
it (`spec.replicas: Invalid value: "two": spec.replicas in body must be of type integer: "string"`).
Schema `default`s are applied on create and update, as structural defaulting does.
`format` is checked as kube-openapi checks it: integers against `int32`/`int64` (and numbers against
`float`) ranges, strings against the formats the apiserver validates (`kube/formats.py`); unknown
formats are ignored. CEL rules (`x-kubernetes-validations`) are evaluated in `kube/cel_rules.py`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from hyperpod_twin.kube import formats

Obj = dict[str, Any]
Cause = dict[str, str]
_TYPE_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


@cache
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float) and value.is_integer():
        return "integer"
    return _TYPE_NAMES.get(type(value), "object")


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return "\"" + json.dumps(value, separators=(",", ":")).replace("\"", "'") + "\""
    return json.dumps(value)


def _cause(reason: str, path: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": path}


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return _cause("FieldValueInvalid", path, f"Invalid value: {_quote(value)}: {detail}")


def validate(value: Any, schema: Obj) -> list[Cause]:
    """Every violation of `schema` by the object `value` (metadata, apiVersion and kind skipped)."""
    causes: list[Cause] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key in ("apiVersion", "kind", "metadata"):
                continue
            if key in props:
                _check(item, props[key], key, causes)
        for req in schema.get("required") or []:
            if req not in value and req not in ("apiVersion", "kind", "metadata"):
                causes.append(_cause("FieldValueRequired", req, "Required value"))
    return causes


def _check(value: Any, schema: Obj, path: str, out: list[Cause]) -> None:
    if not schema:
        return
    if value is None:
        if not schema.get("nullable"):
            out.append(_invalid(path, value, f'{path} in body must be of type {schema.get("type", "object")}: "null"'))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if _json_type(value) not in ("integer", "string"):
            out.append(_invalid(path, value, f'{path} in body must be of type integer,string: "{_json_type(value)}"'))
            return
    elif schema.get("type"):
        want, got = schema["type"], _json_type(value)
        if not (want == got or (want == "number" and got == "integer")):
            out.append(_invalid(path, value, f'{path} in body must be of type {want}: "{got}"'))
            return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_quote(v) for v in schema["enum"])
        out.append(_cause("FieldValueNotSupported", path,
                          f"Unsupported value: {_quote(value)}: supported values: {allowed}"))
    if isinstance(value, str):
        _string(value, schema, path, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _number(value, schema, path, out)
    elif isinstance(value, list):
        _array(value, schema, path, out)
    elif isinstance(value, dict):
        _object(value, schema, path, out)
    _combinators(value, schema, path, out)


def _string(value: str, schema: Obj, path: str, out: list[Cause]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(_cause("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(_invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
    pattern = schema.get("pattern")
    compiled = _regex(pattern) if pattern else None
    if compiled is not None and compiled.search(value) is None:
        out.append(_invalid(path, value, f"{path} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and not formats.string_ok(fmt, value):
        out.append(_invalid(path, value, f"{path} in body must be of type {fmt}: {_quote(value)}"))


def _number(value: float, schema: Obj, path: str, out: list[Cause]) -> None:
    fmt = schema.get("format")
    kind = "integer" if schema.get("type") == "integer" or schema.get("x-kubernetes-int-or-string") else "number"
    if isinstance(fmt, str) and not formats.number_ok(kind, fmt, value):
        out.append(_invalid(path, value, f"Checked value must be of type {kind} with format {fmt} in {path}"))
    if "maximum" in schema:
        top = schema["maximum"]
        if value > top or (schema.get("exclusiveMaximum") and value == top):
            rel = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            out.append(_invalid(path, value, f"{path} in body should be {rel} {top}"))
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            rel = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            out.append(_invalid(path, value, f"{path} in body should be {rel} {low}"))


def _array(value: list[Any], schema: Obj, path: str, out: list[Cause]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(_cause("FieldValueTooMany", path,
                          f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(_invalid(path, value, f"{path} in body should have at least {schema['minItems']} items"))
    if schema.get("uniqueItems"):
        seen: list[Any] = []
        for item in value:
            if item in seen:
                out.append(_cause("FieldValueDuplicate", path, f"Duplicate value: {_quote(item)}"))
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _check(item, items, f"{path}[{i}]", out)


def _object(value: Obj, schema: Obj, path: str, out: list[Cause]) -> None:
    opaque = schema.get("x-kubernetes-embedded-resource") or schema.get("x-kubernetes-preserve-unknown-fields")
    if opaque and not schema.get("properties"):
        return
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        child = f"{path}.{key}"
        if key in props:
            _check(item, props[key], child, out)
        elif isinstance(extra, dict):
            _check(item, extra, child, out)
    for req in schema.get("required") or []:
        if req not in value:
            out.append(_cause("FieldValueRequired", f"{path}.{req}", "Required value"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        out.append(_cause("FieldValueTooMany", path,
                          f"Too many: {len(value)}: must have at most {schema['maxProperties']} items"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        out.append(_invalid(path, value,
                            f"{path} in body should have at least {schema['minProperties']} properties"))


def _combinators(value: Any, schema: Obj, path: str, out: list[Cause]) -> None:
    for sub in schema.get("allOf") or []:
        _check(value, sub, path, out)
    any_of = schema.get("anyOf")
    if any_of and not any(not _sub(value, s, path) for s in any_of):
        out.append(_invalid(path, value, f"{path} in body must be of one of the schemas (anyOf)"))
    one_of = schema.get("oneOf")
    if one_of and sum(1 for s in one_of if not _sub(value, s, path)) != 1:
        out.append(_invalid(path, value, f"{path} in body must validate one and only one schema (oneOf)"))
    if "not" in schema and not _sub(value, schema["not"], path):
        out.append(_cause("FieldValueForbidden", path, "Forbidden: must not validate the schema (not)"))


def _sub(value: Any, schema: Obj, path: str) -> list[Cause]:
    found: list[Cause] = []
    _check(value, schema, path, found)
    return found


def apply_defaults(value: Any, schema: Obj) -> Any:
    """`value` with the schema's `default`s filled in where a property is absent (structural defaulting)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in value and "default" in sub and key not in ("apiVersion", "kind", "metadata"):
                value[key] = json.loads(json.dumps(sub["default"]))
            if key in value and key != "metadata":
                value[key] = apply_defaults(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in list(value):
                if key not in props:
                    value[key] = apply_defaults(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


def message(kind: str, group: str, name: str, causes: list[Cause]) -> str:
    """The Status message: `Kind.group "name" is invalid: cause` (several causes in brackets)."""
    texts = [f"{c['field']}: {c['message']}" for c in causes]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return f'{qualified} "{name}" is invalid: {body}'
