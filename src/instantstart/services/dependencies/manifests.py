"""The `manifests` source of the dependency catalog: Kubernetes objects kept in data/manifests/<dir>."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from instantstart.aws.errors import translate
from instantstart.errors import InvalidInput
from instantstart.kube.apply import apply_object, delete_object, drifted, read_object


def load_documents(directory: str) -> list[dict[str, Any]]:
    """Every object in data/manifests/<directory>/*.yaml, in file order."""
    root = resources.files("instantstart.data").joinpath("manifests").joinpath(directory)
    if not root.is_dir():
        raise InvalidInput(f"The dependency catalog names manifests {directory!r}, which do not exist.")
    docs: list[dict[str, Any]] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            docs.extend(d for d in yaml.safe_load_all(entry.read_text(encoding="utf-8")) if d)
    for doc in docs:
        if not {"apiVersion", "kind", "metadata"} <= set(doc) or "name" not in doc["metadata"]:
            raise InvalidInput(f"A manifest in {directory!r} lacks apiVersion, kind or metadata.name.")
    return docs


def _label(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{doc['kind']} {where}{meta['name']}"


def ensure(api: Any, directory: str) -> tuple[str, dict[str, Any]]:
    """Apply the objects that are missing or drifted; (action, actual). Blocking."""
    created, updated, unchanged = [], [], []
    for doc in load_documents(directory):
        try:
            live = read_object(api, doc)
            if live is None:
                apply_object(api, doc)
                created.append(_label(doc))
            elif drifted(live, doc):
                apply_object(api, doc)
                updated.append(_label(doc))
            else:
                unchanged.append(_label(doc))
        except Exception as exc:
            raise translate(exc, f"apply {_label(doc)}") from exc
    action = "created" if created and not (updated or unchanged) else "updated" if created or updated else "unchanged"
    return action, {"objects": len(created) + len(updated) + len(unchanged), "created": created, "updated": updated}


def present(api: Any, directory: str) -> tuple[int, int]:
    """(objects present, objects desired). Blocking."""
    docs = load_documents(directory)
    return sum(1 for d in docs if read_object(api, d) is not None), len(docs)


def remove(api: Any, directory: str) -> int:
    """Delete the objects in reverse order; how many existed. Blocking."""
    return sum(1 for doc in reversed(load_documents(directory)) if delete_object(api, doc))
