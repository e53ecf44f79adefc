"""Enough of IAM policy evaluation for the twin to enforce a role's identity policies: an explicit Deny wins,
else some Allow must match; Action/NotAction and Resource/NotResource with `*`/`?` wildcards; the String*,
Arn* and Bool condition operators (with IfExists) over a request context."""

from __future__ import annotations

import re
from typing import Any, Literal

Decision = Literal["Allow", "ExplicitDeny", "ImplicitDeny"]


def listed(value: Any) -> list[Any]:
    """IAM's "string or list" fields as a list."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def wildcard(pattern: str, value: str, *, case: bool) -> bool:
    """IAM wildcard match: `*` any run of characters, `?` one character; the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _any_match(patterns: Any, value: str, *, case: bool) -> bool:
    return any(wildcard(str(p), value, case=case) for p in listed(patterns))


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, Any]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    if key not in context:
        return if_exists or base.startswith("StringNot") or base.startswith("ArnNot")
    actual = [str(v) for v in listed(context[key])]
    wanted = [str(v) for v in listed(expected)]
    if base in ("StringEquals", "ArnEquals"):
        return any(a == w for a in actual for w in wanted)
    if base == "StringEqualsIgnoreCase":
        return any(a.lower() == w.lower() for a in actual for w in wanted)
    if base in ("StringLike", "ArnLike"):
        return any(wildcard(w, a, case=True) for a in actual for w in wanted)
    if base in ("StringNotEquals", "ArnNotEquals"):
        return all(a != w for a in actual for w in wanted)
    if base in ("StringNotLike", "ArnNotLike"):
        return all(not wildcard(w, a, case=True) for a in actual for w in wanted)
    if base == "Bool":
        return any(a.lower() == w.lower() for a in actual for w in wanted)
    # An operator this evaluator does not know never grants (and never denies) anything.
    raise ValueError(f"condition operator {operator} is not evaluated by the twin")


def conditions_hold(condition: dict[str, Any] | None, context: dict[str, Any]) -> bool:
    """All condition blocks hold for `context` (AND over operators and keys, OR over a key's values)."""
    for operator, block in (condition or {}).items():
        for key, expected in block.items():
            if not _condition_holds(operator, key, expected, context):
                return False
    return True


def statement_applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, Any]) -> bool:
    """Whether one statement covers this action on this resource under this context."""
    if "Action" in statement and not _any_match(statement["Action"], action, case=False):
        return False
    if "NotAction" in statement and _any_match(statement["NotAction"], action, case=False):
        return False
    if "Resource" in statement and not _any_match(statement["Resource"], resource, case=True):
        return False
    if "NotResource" in statement and _any_match(statement["NotResource"], resource, case=True):
        return False
    try:
        return conditions_hold(statement.get("Condition"), context)
    except ValueError:
        return statement.get("Effect") == "Deny"  # unknown operator: fail closed


def evaluate(
    documents: list[dict[str, Any]], action: str, resource: str, context: dict[str, Any] | None = None
) -> Decision:
    """IAM's decision for one request against a principal's identity policies."""
    allowed = False
    for document in documents:
        for statement in listed(document.get("Statement")):
            if not statement_applies(statement, action, resource, context or {}):
                continue
            if statement.get("Effect") == "Deny":
                return "ExplicitDeny"
            if statement.get("Effect") == "Allow":
                allowed = True
    return "Allow" if allowed else "ImplicitDeny"
