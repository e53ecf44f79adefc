"""The control plane's own IAM policy and its roles' permissions boundary as shipped (deploy/iam, packaged in
data/iam)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

POLICY_RESOURCE = "data/iam/control-plane-policy.json"
BOUNDARY_RESOURCE = "data/iam/permissions-boundary.json"


def resource_path(resource: str) -> Path:
    """The file of a packaged policy (the package is installed unzipped)."""
    return Path(str(resources.files("instantstart").joinpath(resource)))


def control_plane_policy() -> dict[str, Any]:
    """The policy document the control plane needs (least privilege)."""
    document: dict[str, Any] = json.loads(resource_path(POLICY_RESOURCE).read_text())
    return document


def boundary_policy() -> dict[str, Any]:
    """The permissions boundary every role the control plane creates carries (instantstart.aws.iam.BOUNDARY_POLICY)."""
    document: dict[str, Any] = json.loads(resource_path(BOUNDARY_RESOURCE).read_text())
    return document


def granted_actions(document: dict[str, Any]) -> list[str]:
    """Every action an Allow statement of `document` names, sorted, without duplicates."""
    actions: set[str] = set()
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        named = statement.get("Action", [])
        actions.update([named] if isinstance(named, str) else named)
    return sorted(actions)
