"""The release `helm upgrade -o json` prints, read as a `helm list` entry (so no second helm run is needed)."""

from __future__ import annotations

from typing import Any

from instantstart.kube.helm import list_entry

# The shape of helm 3's release JSON (fields the control plane reads; helm prints more: manifest, config, hooks).
PRINTED: dict[str, Any] = {
    "name": "dependencies",
    "namespace": "kube-system",
    "version": 3,
    "info": {"status": "deployed", "description": "Upgrade complete", "last_deployed": "2026-12-03T18:00:00Z"},
    "chart": {"metadata": {"name": "hyperpod-dependencies", "version": "0.1.0", "appVersion": "1.0"}},
    "manifest": "---\n# Source: ...",
}


def test_a_printed_release_reads_as_its_list_entry() -> None:
    assert list_entry(PRINTED) == {
        "name": "dependencies",
        "namespace": "kube-system",
        "revision": "3",
        "status": "deployed",
        "chart": "hyperpod-dependencies-0.1.0",
        "app_version": "1.0",
    }


def test_a_release_missing_a_field_asks_helm_list_instead() -> None:
    assert list_entry({}) is None
    assert list_entry({**PRINTED, "info": {}}) is None
    assert list_entry({**PRINTED, "chart": {"metadata": {"name": "hyperpod-dependencies"}}}) is None
    assert list_entry({**PRINTED, "version": None}) is None
