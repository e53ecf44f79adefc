"""The manifests source of the dependency catalog: shipped documents and drift detection."""

from __future__ import annotations

import pytest

from instantstart.errors import InvalidInput
from instantstart.kube.apply import drifted
from instantstart.services.dependencies.catalog import parse_catalog
from instantstart.services.dependencies.manifests import load_documents


def test_priority_classes_ship_in_preemption_order() -> None:
    docs = load_documents("priority-classes")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("PriorityClass", "hyperpod-inference"),
        ("PriorityClass", "hyperpod-training"),
        ("PriorityClass", "hyperpod-batch"),
    ]
    values = [d["value"] for d in docs]
    assert values == sorted(values, reverse=True) and not any(d["globalDefault"] for d in docs)
    with pytest.raises(InvalidInput, match="do not exist"):
        load_documents("no-such-dir")


def test_drift_compares_desired_fields_only() -> None:
    desired = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "value": 10,
    }
    live = {**desired, "metadata": {"name": "x", "labels": {"a": "b", "extra": "1"}, "uid": "u"}, "status": {}}
    assert drifted(live, desired) == []
    assert drifted({**live, "value": 11}, desired) == ["value"]
    assert drifted({**live, "metadata": {"name": "x"}}, desired) == ["metadata.labels"]


def test_catalog_validates_manifests_entries() -> None:
    good = "dependencies: [{name: p, source: manifests, manifests: priority-classes, namespace: kube-system}]"
    assert parse_catalog(good).get("p").manifests == "priority-classes"
    with pytest.raises(Exception, match="needs `manifests`"):
        parse_catalog("dependencies: [{name: p, source: manifests, namespace: kube-system}]")
    with pytest.raises(Exception, match="do not belong"):
        parse_catalog("dependencies: [{name: p, source: manifests, manifests: x, addon: a, namespace: kube-system}]")
