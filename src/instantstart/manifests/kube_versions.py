"""Kubernetes version facts for an upgrade: the next minor version, a chart's kubeVersion constraint, removed APIs.

Pure functions: the upgrade plan feeds them what it read from EKS and helm.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_CLAUSE_RE = re.compile(r"^(>=|<=|!=|=>|=<|>|<|=|~|\^)?\s*v?([0-9xX*]+(?:\.[0-9xX*]+){0,2})(?:-[0-9A-Za-z.-]+)?$")


def minor_of(version: str) -> tuple[int, int]:
    """(major, minor) of a Kubernetes version such as 1.32 or v1.32.3-eks-1; ValueError for anything else."""
    found = _VERSION_RE.match(version.strip())
    if found is None:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected e.g. 1.32)")
    return int(found.group(1)), int(found.group(2))


def next_minor(version: str) -> str:
    """The Kubernetes minor version after `version` (EKS upgrades one minor version at a time)."""
    major, minor = minor_of(version)
    return f"{major}.{minor + 1}"


def _triple(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".") if p.isdigit()]
    return tuple([*parts, 0, 0, 0][:3])


def _clause_holds(op: str, bound: str, version: tuple[int, ...]) -> bool:
    fixed = [p for p in bound.split(".") if p not in ("x", "X", "*")]
    want = _triple(".".join(fixed))
    if op in ("", "=") and len(fixed) < 3:
        return version[: len(fixed)] == want[: len(fixed)]  # 1.32 or 1.32.x: any patch of it
    if op == "~":  # ~1.32.1: >=1.32.1 <1.33.0; ~1: >=1.0.0 <2.0.0
        upper = (want[0] + 1, 0, 0) if len(fixed) == 1 else (want[0], want[1] + 1, 0)
        return want <= version < upper
    if op == "^":  # ^1.32.1: >=1.32.1 <2.0.0 (major 0: the minor is fixed)
        upper = (want[0] + 1, 0, 0) if want[0] else (0, want[1] + 1, 0)
        return want <= version < upper
    return {
        "": version == want, "=": version == want, "!=": version != want, ">": version > want, "<": version < want,
        ">=": version >= want, "=>": version >= want, "<=": version <= want, "=<": version <= want,
    }[op]


def satisfies(constraint: str, version: str) -> bool:
    """Whether Kubernetes `version` (e.g. 1.33, taken as 1.33.0 and up to its last patch) meets a helm chart's
    kubeVersion constraint (Masterminds semver: `>=1.23.0-0`, `>= 1.21.0, < 1.34.0`, `~1.32`, `a || b`). An empty
    constraint allows every version. The target minor's first patch is what the cluster runs right after the
    upgrade, so that is what is checked. ValueError for a clause that cannot be read."""
    if not constraint.strip():
        return True
    major, minor = minor_of(version)
    target = (major, minor, 0)
    for alternative in constraint.split("||"):
        joined = re.sub(r"([<>=!~^]+)\s+", r"\1", alternative.strip())  # ">= 1.21" is one clause
        clauses = [c for c in re.split(r"[,\s]+", joined) if c]
        if all(_holds(clause, target) for clause in clauses):
            return True
    return False


def _holds(clause: str, version: tuple[int, ...]) -> bool:
    found = _CLAUSE_RE.match(clause)
    if found is None:
        raise ValueError(f"unreadable kubeVersion clause {clause!r}")
    return _clause_holds(found.group(1) or "", found.group(2), version)


@dataclass(frozen=True)
class RemovedApi:
    """An API version Kubernetes stops serving in `removed_in`, and what to use instead."""

    api_version: str
    kind: str
    removed_in: str
    replacement: str


# The Kubernetes deprecated-API migration guide, from the first version EKS clusters here can upgrade to (1.29).
REMOVED_APIS: tuple[RemovedApi, ...] = (
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", "1.29", "flowcontrol.apiserver.k8s.io/v1"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta2", "PriorityLevelConfiguration", "1.29",
               "flowcontrol.apiserver.k8s.io/v1"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "1.32", "flowcontrol.apiserver.k8s.io/v1"),
    RemovedApi("flowcontrol.apiserver.k8s.io/v1beta3", "PriorityLevelConfiguration", "1.32",
               "flowcontrol.apiserver.k8s.io/v1"),
)


@dataclass(frozen=True)
class ApiFinding:
    """One object of ours that uses an API the target version no longer serves."""

    source: str
    kind: str
    name: str
    api_version: str
    removed_in: str
    replacement: str


def removed_apis(target: str, objects: Iterable[tuple[str, dict[str, Any]]]) -> list[ApiFinding]:
    """The objects (source label, manifest) whose apiVersion/kind `target` no longer serves (removed in `target`
    or earlier: an object still on a removed API would already fail to apply, and is named all the same)."""
    goal = minor_of(target)
    findings: list[ApiFinding] = []
    for source, obj in objects:
        for api in REMOVED_APIS:
            if obj.get("apiVersion") == api.api_version and obj.get("kind") == api.kind and minor_of(
                api.removed_in
            ) <= goal:
                name = str((obj.get("metadata") or {}).get("name") or "")
                findings.append(ApiFinding(source, api.kind, name, api.api_version, api.removed_in, api.replacement))
    return findings
