"""The real CustomResourceDefinitions the twin installs, as data (provenance in SOURCES.md).

Each file is the official CRD with `description` texts stripped (schemas, enums, ranges, patterns,
defaults, printer columns and CEL rule texts kept). HyperPodPyTorchJob and HyperpodNodeClass have no
published CRD; theirs are derived as SOURCES.md says.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _load(name: str) -> dict[str, Any]:
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def crd(name: str) -> dict[str, Any]:
    """A fresh copy of the CRD named `<plural>.<group>` (FileNotFoundError when the twin has none)."""
    return copy.deepcopy(_load(name))


def names() -> list[str]:
    """Every CRD the twin carries."""
    return sorted(p.name[: -len(".json")] for p in resources.files(__name__).iterdir() if p.name.endswith(".json"))
