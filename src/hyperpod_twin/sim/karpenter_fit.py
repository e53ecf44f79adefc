"""Karpenter's fit test: the node a NodePool would get from an instance group, and whether it admits a pod."""

from __future__ import annotations

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.node_capacity import allocatable_of, capacity_of
from hyperpod_twin.sim.nodes import COMPUTE_TYPE_LABEL, GROUP_LABEL, HEALTH_LABEL, INSTANCE_TYPE_LABEL

POOL_LABEL = "karpenter.sh/nodepool"


def requirement_ok(req: Obj, labels: dict[str, str]) -> bool:
    """Whether node `labels` meet one NodePool requirement."""
    expr = {"key": req.get("key", ""), "operator": req.get("operator", "In"), "values": req.get("values") or []}
    return kobj.node_selector_term_matches({"matchExpressions": [expr]}, {"metadata": {"name": "", "labels": labels}})


def room_under_limits(pool: Obj, groups: dict[str, Obj], managed: dict[str, Obj], requested: dict[str, int]) -> int:
    """How many more nodes the pool's spec.limits allow (counting launching and `requested` nodes); large if none."""
    limits = {k: kobj.quantity(v) for k, v in ((pool.get("spec") or {}).get("limits") or {}).items()}
    if not limits:
        return 1 << 30
    used: dict[str, float] = {}
    per_node: dict[str, float] = {}
    for name, details in groups.items():
        if managed.get(name) is not pool:
            continue
        capacity = {k: kobj.quantity(v) for k, v in capacity_of(str(details.get("InstanceType", ""))).items()}
        per_node = per_node or capacity
        target = max(int(details.get("TargetCount", 0) or 0), requested.get(name, 0))
        for resource, amount in capacity.items():
            used[resource] = used.get(resource, 0.0) + amount * target
    room = 1 << 30
    for resource, limit in limits.items():
        each = per_node.get(resource, 0.0)
        if each > 0:
            room = min(room, int((limit - used.get(resource, 0.0)) // each))
    return max(room, 0)


def virtual_node(pool: Obj, details: Obj) -> tuple[dict[str, str], list[Obj], dict[str, str]]:
    """Labels, taints and allocatable of a node the pool would get from the instance group `details`."""
    itype = str(details.get("InstanceType", ""))
    template = (pool.get("spec") or {}).get("template") or {}
    labels = {
        INSTANCE_TYPE_LABEL: itype,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        COMPUTE_TYPE_LABEL: "hyperpod",
        GROUP_LABEL: str(details.get("InstanceGroupName", "")),
        HEALTH_LABEL: "Schedulable",
        POOL_LABEL: pool["metadata"]["name"],
        **((template.get("metadata") or {}).get("labels") or {}),
    }
    kube = details.get("KubernetesConfig") or {}
    labels.update(kube.get("CurrentLabels") or kube.get("DesiredLabels") or {})
    taints = [dict(t) for t in (template.get("spec") or {}).get("taints") or []]
    taints += [
        {"key": t["Key"], "value": t.get("Value", ""), "effect": t["Effect"]}
        for t in kube.get("CurrentTaints") or kube.get("DesiredTaints") or []
    ]
    return labels, taints, allocatable_of(capacity_of(itype))

def admits(
    pod: Obj,
    pool: Obj,
    labels: dict[str, str],
    taints: list[Obj],
    requests: dict[str, float],
    alloc: dict[str, str],
) -> bool:
    """Whether a node with these labels, taints and allocatable, of this pool, admits `pod`."""
    requirements = ((((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("requirements")) or []
    if not all(requirement_ok(r, labels) for r in requirements):
        return False
    spec = pod.get("spec", {})
    if not kobj.match_map(spec.get("nodeSelector"), labels):
        return False
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    node = {"metadata": {"name": "", "labels": labels}}
    if terms and not any(kobj.node_selector_term_matches(t, node) for t in terms):
        return False
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not kobj.tolerates(
            spec.get("tolerations"), taint
        ):
            return False
    return all(v <= kobj.quantity(alloc.get(r, 0)) for r, v in requests.items() if v > 0)
