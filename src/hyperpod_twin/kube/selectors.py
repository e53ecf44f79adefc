"""Label and field selectors as kube-apiserver parses them (query-string syntax and LabelSelector objects)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hyperpod_twin.kube.status import ApiError

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]

_REQ = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<val>\([^)]*\)|[A-Za-z0-9_.-]*))?\s*$"
)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> Predicate | None:
    """A predicate on an object's labels, or None for an empty selector; 400 on bad syntax."""
    if not text or not text.strip():
        return None
    checks = [_requirement(req) for req in _split_top(text)]

    def predicate(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return predicate


def _requirement(req: str) -> Callable[[dict[str, str]], bool]:
    """One requirement of a label selector as a check on a label map."""
    m = _REQ.match(req)
    if m is None or (m.group("neg") and m.group("op")):
        raise ApiError(400, f"unable to parse requirement: {req!r}", "BadRequest")
    key, op, val = m.group("key"), (m.group("op") or "").strip(), m.group("val")
    if m.group("neg"):
        return lambda labels: key not in labels
    if not op:
        return lambda labels: key in labels
    if op in ("=", "=="):
        return lambda labels: labels.get(key) == val
    if op == "!=":
        return lambda labels: labels.get(key) != val
    if not val or not val.startswith("("):
        raise ApiError(400, f"unable to parse requirement: {req!r}", "BadRequest")
    values = {v.strip() for v in val[1:-1].split(",") if v.strip()}
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values



def field_value(obj: Obj, path: str) -> str:
    """The string form of a dotted field of `obj` ("" when absent), as field selectors compare it."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


# Field labels kube-apiserver supports besides metadata.name and metadata.namespace, per (group, plural)
# (the registries' GetAttrs / field label conversion functions). Custom resources support only the two.
FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                             "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
                             "status.nominatedNodeName"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("events.k8s.io", "events"): frozenset({"regarding.kind", "regarding.namespace", "regarding.name",
                                            "regarding.uid", "regarding.apiVersion", "regarding.resourceVersion",
                                            "regarding.fieldPath", "reason", "reportingController", "type"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "services"): frozenset({"spec.clusterIP", "spec.type"}),
    ("", "replicationcontrollers"): frozenset({"status.replicas"}),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
    ("certificates.k8s.io", "certificatesigningrequests"): frozenset({"spec.signerName"}),
}


def parse_field_selector(text: str | None, rtype_key: tuple[str, str] | None = None) -> Predicate | None:
    """A predicate on dotted fields (metadata.name, status.phase, spec.nodeName, …); 400 on bad syntax,
    and (given the resource's (group, plural)) 400 for a field label the kind does not support."""
    if not text or not text.strip():
        return None
    checks: list[tuple[str, str, bool]] = []
    for req in text.split(","):
        req = req.strip()
        if not req:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)$", req)
        if m is None:
            raise ApiError(400, f"invalid selector: {req!r}; can't understand '{req}'", "BadRequest")
        field = m.group(1)
        if rtype_key is not None and field not in ("metadata.name", "metadata.namespace") and field not in (
            FIELD_LABELS.get(rtype_key) or frozenset()
        ):
            raise ApiError(400, f"field label not supported: {field}", "BadRequest")
        checks.append((field, m.group(3), m.group(2) != "!="))

    def predicate(obj: Obj) -> bool:
        return all((field_value(obj, path) == value) == equal for path, value, equal in checks)

    return predicate


def match_label_selector(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector object (matchLabels + matchExpressions) selects `labels`.

    An empty selector selects everything, as in Deployments and Services' pod selection."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def combine(*predicates: Predicate | None) -> Predicate | None:
    """All of the given predicates (None entries ignored)."""
    active = [p for p in predicates if p is not None]
    if not active:
        return None
    return lambda obj: all(p(obj) for p in active)
