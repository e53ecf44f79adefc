"""Container env entries: plain values, and references to a key of a Kubernetes Secret (never its value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SecretKeyRef:
    """A key of a Secret in the pod's namespace: the kubelet reads it when the container starts."""

    name: str
    key: str


EnvValue = str | SecretKeyRef


def env_entries(env: Mapping[str, EnvValue]) -> list[dict[str, Any]]:
    """A container's `env` list, in order: {name, value}, or {name, valueFrom: {secretKeyRef: {name, key}}}."""
    entries: list[dict[str, Any]] = []
    for name, value in env.items():
        if isinstance(value, SecretKeyRef):
            entries.append({"name": name, "valueFrom": {"secretKeyRef": {"name": value.name, "key": value.key}}})
        else:
            entries.append({"name": name, "value": value})
    return entries
