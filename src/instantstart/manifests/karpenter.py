"""HyperPod-managed Karpenter objects (HyperpodNodeClass, NodePool) and the autoscaling role's name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from instantstart.manifests.labels import INSTANCE_TYPE_LABEL, MANAGED_LABELS

NODECLASS_GROUP = "karpenter.sagemaker.amazonaws.com"
NODECLASS_PLURAL = "hyperpodnodeclasses"
NODEPOOL_GROUP = "karpenter.sh"
NODEPOOL_PLURAL = "nodepools"
VERSION = "v1"
MAX_GROUPS = 10  # a HyperpodNodeClass names at most 10 instance groups


@dataclass(frozen=True)
class KarpenterSettings:
    """The NodePool's decisions: which groups, and how idle capacity is consolidated back toward zero."""

    instance_groups: tuple[str, ...]
    instance_types: tuple[str, ...] = ()
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "60s"
    budget_nodes: str = "10%"
    gpu_limit: int | None = None
    name: str = "instantstart"
    labels: dict[str, str] = field(default_factory=dict)


def node_class(s: KarpenterSettings) -> dict[str, Any]:
    """The cluster-scoped HyperpodNodeClass binding the NodePool to the chosen instance groups."""
    return {
        "apiVersion": f"{NODECLASS_GROUP}/{VERSION}",
        "kind": "HyperpodNodeClass",
        "metadata": {"name": s.name, "labels": dict(MANAGED_LABELS)},
        "spec": {"instanceGroups": list(s.instance_groups)},
    }


def node_pool(s: KarpenterSettings) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool on the node class, with consolidation toward zero and a disruption budget.
    Only the requirement keys the HyperPod provider honours are used (instance type, arch)."""
    requirements: list[dict[str, Any]] = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    if s.instance_types:
        requirements.append(
            {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": sorted(set(s.instance_types))}
        )
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"instantstart.io/nodepool": s.name, **s.labels}},
            "spec": {
                "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "HyperpodNodeClass", "name": s.name},
                "requirements": requirements,
            },
        },
        "disruption": {
            "consolidationPolicy": s.consolidation_policy,
            "consolidateAfter": s.consolidate_after,
            "budgets": [{"nodes": s.budget_nodes}],
        },
    }
    if s.gpu_limit is not None:
        spec["limits"] = {"nvidia.com/gpu": str(s.gpu_limit)}
    return {
        "apiVersion": f"{NODEPOOL_GROUP}/{VERSION}",
        "kind": "NodePool",
        "metadata": {"name": s.name, "labels": dict(MANAGED_LABELS)},
        "spec": spec,
    }


def role_name(tag: str) -> str:
    """The autoscaling role of a cluster (≤ 64 characters for a tag of ≤ 32)."""
    return f"instantstart-{tag}-hp-autoscaling"
