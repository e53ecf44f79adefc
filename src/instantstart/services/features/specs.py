"""The advanced features: what each key installs, what it needs, and the owner ledger of shared dependencies."""

from __future__ import annotations

from dataclasses import dataclass

from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster, record_facts
from instantstart.services.base.workload_identity import Identity
from instantstart.services.dependencies.catalog import load_catalog
from instantstart.store.db import Database

CLUSTER_OWNER = "cluster"
"""Owner of a dependency the cluster had before any feature asked for it (defaults, or installed by hand)."""


@dataclass(frozen=True)
class FeatureSpec:
    """One feature key: its catalog dependency (None: not an add-on or chart) and its own IAM identity."""

    key: str
    title: str
    primary: str | None
    identity: Identity | None = None


MANAGED = "arn:aws:iam::aws:policy/"
FEATURES: dict[str, FeatureSpec] = {
    "certManager": FeatureSpec("certManager", "cert-manager", "cert-manager"),
    "fsxCsiDriver": FeatureSpec(
        "fsxCsiDriver",
        "FSx for Lustre CSI driver",
        "aws-fsx-csi-driver",
        Identity("kube-system", "fsx-csi-controller-sa", "fsx-csi"),
    ),
    "trainingOperator": FeatureSpec(
        "trainingOperator",
        "HyperPod training operator",
        "amazon-sagemaker-hyperpod-training-operator",
        Identity(
            "aws-hyperpod",
            "hp-training-operator-controller-manager",
            "training-op",
            managed_policies=(MANAGED + "AmazonSageMakerHyperPodTrainingOperatorAccess",),
        ),
    ),
    "inferenceOperator": FeatureSpec(
        "inferenceOperator",
        "HyperPod inference operator",
        "amazon-sagemaker-hyperpod-inference",
        Identity(
            "hyperpod-inference-system",
            "hyperpod-inference-controller-manager",
            "inference",
            managed_policies=(MANAGED + "AmazonSageMakerHyperPodInferenceAccess",),
            irsa=True,
            trust_services=("sagemaker.amazonaws.com",),
        ),
    ),
    "tieredStorage": FeatureSpec("tieredStorage", "managed tiered checkpointing", None),
    "kuberayOperator": FeatureSpec("kuberayOperator", "KubeRay operator", "kuberay-operator"),
    "observability": FeatureSpec(
        "observability",
        "HyperPod observability",
        "amazon-sagemaker-hyperpod-observability",
        Identity("hyperpod-observability", "hyperpod-observability-operator-otel-collector", "observability"),
    ),
    "keda": FeatureSpec("keda", "KEDA (autoscaling of model servers)", "keda"),
    "taskGovernance": FeatureSpec(
        "taskGovernance", "HyperPod task governance (Kueue)", "amazon-sagemaker-hyperpod-taskgovernance"
    ),
}
ORDER = tuple(FEATURES)
"""Dependency order: a feature comes after every feature whose dependency it needs."""


def closure(key: str) -> list[str]:
    """Catalog names a feature installs: its primary dependency and what that depends on (dependencies first)."""
    primary = FEATURES[key].primary
    return [d.name for d in load_catalog().order([primary])] if primary else []


def needs(key: str) -> list[str]:
    """Other feature keys whose primary dependency `key` needs."""
    mine = set(closure(key)) - {FEATURES[key].primary}
    return [k for k, spec in FEATURES.items() if k != key and spec.primary in mine]


def dependents(key: str) -> list[str]:
    """Feature keys that need `key`."""
    return [k for k in FEATURES if key in needs(k)]


# -- the owner ledger (cluster facts: feature_owners = {dependency: [owner, …]}) ----------------------------------


def owners(db: Database, tag: str) -> dict[str, list[str]]:
    """Who installed what: dependency name → owners (feature keys, or `cluster`)."""
    return {k: list(v) for k, v in facts_of(get_cluster(db, tag)).feature_owners.items()}


def claim(db: Database, tag: str, key: str, installed: set[str]) -> dict[str, list[str]]:
    """Record `key` as an owner of each dependency it installs; one the cluster already had (`installed`)
    and nobody claimed keeps `cluster` as an owner, so no feature ever removes it. The new ledger."""
    ledger = owners(db, tag)
    for name in closure(key):
        current = ledger.setdefault(name, [])
        if not current and name in installed:
            current.append(CLUSTER_OWNER)
        if key not in current:
            current.append(key)
    record_facts(db, tag, feature_owners=ledger)
    return ledger


def release(db: Database, tag: str, key: str) -> list[str]:
    """Drop `key` from every dependency it owns (for its primary dependency, which the user turns off by
    name, the `cluster` claim too); the names nobody owns any more, dependents first. The ledger is saved."""
    ledger = owners(db, tag)
    primary = FEATURES[key].primary
    orphaned = []
    for name in reversed(closure(key)):
        current = [o for o in ledger.get(name, []) if o != key and not (name == primary and o == CLUSTER_OWNER)]
        if current:
            ledger[name] = current
        else:
            ledger.pop(name, None)
            orphaned.append(name)
    record_facts(db, tag, feature_owners=ledger)
    return orphaned
