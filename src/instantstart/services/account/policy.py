"""The control plane's own IAM policy as shipped (deploy/iam/control-plane-policy.json, packaged in data/iam)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

POLICY_RESOURCE = "data/iam/control-plane-policy.json"


def control_plane_policy() -> dict[str, Any]:
    """The policy document the control plane needs (least privilege)."""
    text = resources.files("instantstart").joinpath(POLICY_RESOURCE).read_text()
    document: dict[str, Any] = json.loads(text)
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
