"""CEL validation rules of CRDs (`x-kubernetes-validations`), evaluated as kube-apiserver evaluates them.

Each rule is compiled once with `common-expression-language` (the Rust CEL interpreter) and run with
`self` bound to the value at the schema node that declares it. A rule referencing `oldSelf` is a
transition rule: it runs only on an update where the old object has a value at the same place (object
properties, map values and items of `x-kubernetes-list-type: map` lists correlate; atomic list items do
not). A rule evaluating to false is one cause of the 422: the rule's `message` (or `messageExpression`,
else `failed rule: <rule>`), at the node's path plus the rule's `fieldPath`, with its `reason`. A
runtime error is a cause `<error> evaluating rule: <rule>`, as the apiserver words it.

The Kubernetes CEL libraries are provided where the CRDs we serve need them (regex `find`/`findAll`,
the strings extension, list `isSorted`/`sum`/`indexOf`). A rule that does not compile, or calls a
function the twin does not provide, is not evaluated: it is logged once, listed by `unevaluated()`,
and each write it would have judged gets a `Warning` (docs/TWIN.md). A test keeps that list empty
for every CRD the twin ships.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import cel

Obj = dict[str, Any]
Cause = dict[str, str]
_log = logging.getLogger(__name__)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Standard CEL functions and macros the interpreter provides; operators have non-identifier names.
_STANDARD = {"size", "has", "all", "exists", "exists_one", "map", "filter", "contains", "startsWith",
             "endsWith", "matches", "string", "int", "uint", "double", "bytes", "bool", "timestamp",
             "duration", "type", "dyn", "max", "min", "getFullYear", "getMonth", "getDayOfMonth",
             "getDayOfYear", "getDayOfWeek", "getHours", "getMinutes", "getSeconds", "getMilliseconds",
             "getDate"}


def _find(value: str, pattern: str) -> str:
    found = re.search(pattern, value)
    return found.group(0) if found else ""


def _find_all(value: str, pattern: str, limit: int = -1) -> list[str]:
    hits = [m.group(0) for m in re.finditer(pattern, value)]
    return hits if limit < 0 else hits[:limit]


def _index_of(target: Any, item: Any, start: int = 0) -> int:
    if isinstance(target, str):
        return target.find(item, start)
    return next((i for i, v in enumerate(target) if v == item), -1)


def _last_index_of(target: Any, item: Any) -> int:
    if isinstance(target, str):
        return target.rfind(item)
    return max((i for i, v in enumerate(target) if v == item), default=-1)


def _split(value: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    return value.split(sep, limit - 1) if limit > 0 else value.split(sep)


def _replace(value: str, old: str, new: str, limit: int = -1) -> str:
    return value.replace(old, new, limit)


def _substring(value: str, start: int, end: int | None = None) -> str:
    return value[start:] if end is None else value[start:end]


def _sum(items: list[Any]) -> Any:
    return sum(items)


# Kubernetes CEL libraries (regex, strings extension, lists) as receiver-first Python functions.
_LIBRARY: dict[str, Any] = {
    "find": _find, "findAll": _find_all, "lowerAscii": lambda s: s.lower(), "upperAscii": lambda s: s.upper(),
    "trim": lambda s: s.strip(), "split": _split, "join": lambda items, sep="": sep.join(items),
    "replace": _replace, "indexOf": _index_of, "lastIndexOf": _last_index_of, "substring": _substring,
    "charAt": lambda s, i: s[i] if i < len(s) else "", "isSorted": lambda items: list(items) == sorted(items),
    "sum": _sum,
}


@dataclass(frozen=True)
class Compiled:
    """One compiled rule, or why it cannot be evaluated (`problem`)."""

    program: Any
    transition: bool
    problem: str = ""


_UNEVALUATED: dict[str, str] = {}


@cache
def compile_rule(rule: str) -> Compiled:
    """The rule compiled, or a `problem` when it does not compile or calls a function the twin lacks."""
    try:
        program = cel.compile(rule)
    except (ValueError, RuntimeError) as exc:
        return _unevaluated(rule, f"does not compile: {exc}")
    missing = sorted(f for f in program.functions()
                     if _IDENT.match(f) and f not in _STANDARD and f not in _LIBRARY)
    if missing:
        return _unevaluated(rule, f"calls functions the twin does not provide: {', '.join(missing)}")
    return Compiled(program, "oldSelf" in program.variables())


def _unevaluated(rule: str, problem: str) -> Compiled:
    # compile_rule is cached, so this runs (and logs) once per rule text.
    _log.warning("CEL rule not evaluated by the twin (%s): %s", problem, rule)
    _UNEVALUATED[rule] = problem
    return Compiled(None, False, problem)


def compile_causes(schema: Obj, path: str) -> list[Cause]:
    """CRD creation: every rule whose CEL does not parse, as the apiserver refuses it
    (`…x-kubernetes-validations[0].rule: Invalid value: "…": compilation failed: …`). Rules that parse but
    call a function the twin lacks are the twin's limitation, not the CRD's: they are accepted."""
    out: list[Cause] = []
    for j, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        text = str((rule or {}).get("rule") or "")
        problem = compile_rule(text).problem
        if problem.startswith("does not compile"):
            out.append({"reason": "FieldValueInvalid", "field": f"{path}.x-kubernetes-validations[{j}].rule",
                        "message": f"Invalid value: {json.dumps(text)}: compilation failed: "
                                   f"{problem.removeprefix('does not compile: ')}"})
    for key, sub in (schema.get("properties") or {}).items():
        out += compile_causes(sub, f"{path}.properties[{key}]")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out += compile_causes(schema[key], f"{path}.{key}")
    return out


def unevaluated() -> dict[str, str]:
    """Every rule seen so far that the twin cannot evaluate, with the reason."""
    return dict(_UNEVALUATED)


def has_rules(schema: Obj) -> bool:
    """Whether any node of `schema` declares `x-kubernetes-validations`."""
    return '"x-kubernetes-validations"' in _dump(id(schema), schema)


_DUMPS: dict[int, tuple[Obj, str]] = {}


def _dump(key: int, schema: Obj) -> str:
    held = _DUMPS.get(key)
    if held is None or held[0] is not schema:
        held = (schema, json.dumps(schema))
        _DUMPS[key] = held
    return held[1]


def validate(value: Any, schema: Obj, old: Any, warnings: list[str]) -> list[Cause]:
    """Every CEL rule failure of `value` (old: the stored object on update, else None)."""
    out: list[Cause] = []
    if not has_rules(schema):
        return out
    if isinstance(value, dict):
        # Root rules see apiVersion, kind and only metadata.name/generateName, as on the apiserver.
        root = {**value, "metadata": {k: v for k, v in (value.get("metadata") or {}).items()
                                      if k in ("name", "generateName")}}
        for rule in schema.get("x-kubernetes-validations") or []:
            _run(rule, root, schema, old, "<nil>", out, warnings)
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key in props and key not in ("apiVersion", "kind", "metadata", "status"):
                old_item = old.get(key) if isinstance(old, dict) else None
                _walk(item, props[key], old_item, key, out, warnings)
    return out


def _walk(value: Any, schema: Obj, old: Any, path: str, out: list[Cause], warnings: list[str]) -> None:
    if value is None or not schema:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        _run(rule, value, schema, old, path, out, warnings)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if sub:
                old_item = old.get(key) if isinstance(old, dict) else None
                _walk(item, sub, old_item, f"{path}.{key}" if key in props else f"{path}[{key}]", out, warnings)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        for i, item in enumerate(value):
            _walk(item, items, _correlate(item, old, keys), f"{path}[{i}]", out, warnings)


def _correlate(item: Any, old: Any, keys: list[str] | None) -> Any:
    if not keys or not isinstance(old, list) or not isinstance(item, dict):
        return None
    ident = [item.get(k) for k in keys]
    return next((o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == ident), None)


def _run(rule: Obj, value: Any, schema: Obj, old: Any, path: str, out: list[Cause], warnings: list[str]) -> None:
    text = str(rule.get("rule") or "")
    compiled = compile_rule(text)
    if compiled.problem:
        warnings.append(f"{path}: rule not evaluated by the twin ({compiled.problem}): {text}")
        return
    if compiled.transition and old is None:
        return
    env: Obj = {**_LIBRARY, "self": _plain(value)}
    if compiled.transition:
        env["oldSelf"] = _plain(old)
    kind = _type_name(schema)
    try:
        result = compiled.program.execute(env)
    except (RuntimeError, TypeError, ValueError, KeyError, OverflowError) as exc:
        out.append(_invalid(path, kind, f"{_error_text(exc)} evaluating rule: {text.strip()}"))
        return
    if result is True:
        return
    field = path + _field_path(str(rule.get("fieldPath") or ""))
    detail = _message(rule, env) or f"failed rule: {text.strip()}"
    out.append(_by_reason(str(rule.get("reason") or "FieldValueInvalid"), field, kind, detail))


def _message(rule: Obj, env: Obj) -> str:
    expression = rule.get("messageExpression")
    if expression:
        compiled = compile_rule(str(expression))
        if not compiled.problem:
            try:
                text = compiled.program.execute(env)
            except (RuntimeError, TypeError, ValueError, KeyError):
                text = None
            if isinstance(text, str) and text.strip():
                return text
    return str(rule.get("message") or "")


def _by_reason(reason: str, field: str, kind: str, detail: str) -> Cause:
    if reason == "FieldValueForbidden":
        return {"reason": reason, "field": field, "message": f"Forbidden: {detail}"}
    if reason == "FieldValueRequired":
        return {"reason": reason, "field": field, "message": f"Required value: {detail}"}
    if reason == "FieldValueDuplicate":
        return {"reason": reason, "field": field, "message": f"Duplicate value: {json.dumps(detail)}"}
    return _invalid(field, kind, detail)


def _invalid(field: str, kind: str, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {json.dumps(kind)}: {detail}"}


def _field_path(text: str) -> str:
    if not text:
        return ""
    return text if text.startswith(("[", ".")) else "." + text


def _type_name(schema: Obj) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer-or-string"
    return str(schema.get("type") or "object")


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"no such key: {text}" if isinstance(exc, KeyError) else text


def _plain(value: Any) -> Any:
    """JSON values as CEL sees them: integral floats (JSON numbers) as ints."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
