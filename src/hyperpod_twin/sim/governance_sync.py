"""The task governance add-on's sync: a cluster's scheduler config and compute quotas (AWS side) become Kueue
objects, as the HyperPod task governance EKS add-on creates them (names from the HyperPod CLI's constants:
namespace `hyperpod-ns-<team>`, ClusterQueue `<namespace>-clusterqueue`, LocalQueue `<namespace>-localqueue`,
labels `sagemaker.amazonaws.com/sagemaker-managed-queue` and `…/quota-allocation-id`).

Mapping (the twin's, from the SageMaker API documentation): every team's ClusterQueue is in one cohort, so idle
quota can be lent; a quota given by `Count` is that many instances' vCPU, memory, accelerators and EFA, one given
by `Accelerators` (vCPU/memory unset) the same share of an instance's vCPU and memory; `ResourceSharingConfig`
Lend → borrowingLimit 0, DontLend → lendingLimit 0 and borrowingLimit 0, LendAndBorrow → borrowingLimit
BorrowLimit % (default 50) of the nominal quota; lenders reclaim what others borrowed (reclaimWithinCohort Any);
`PreemptTeamTasks` LowerPriority → withinClusterQueue LowerPriority; each priority class becomes a
WorkloadPriorityClass `<name>-priority` whose value is its weight. A disabled quota, or one deleted, loses its
queues (the namespace stays, with whatever runs in it)."""

from __future__ import annotations

import copy
import math

from hyperpod_twin.aws import instance_types
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NAMESPACES, TypeKey
from hyperpod_twin.sim.kobj import Obj

GROUP = "kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta1"
CLUSTER_QUEUES: TypeKey = (GROUP, "clusterqueues")
LOCAL_QUEUES: TypeKey = (GROUP, "localqueues")
FLAVORS: TypeKey = (GROUP, "resourceflavors")
PRIORITIES: TypeKey = (GROUP, "workloadpriorityclasses")
MANAGED = "sagemaker.amazonaws.com/sagemaker-managed-queue"
QUOTA_ID = "sagemaker.amazonaws.com/quota-allocation-id"
COHORT = "hyperpod-task-governance"
GPU, NEURON, EFA = "nvidia.com/gpu", "aws.amazon.com/neurondevice", "vpc.amazonaws.com/efa"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
KEY = "governance"  # sim.extra: the latest (scheduler, quotas) the AWS side published


def namespace_of(team: str) -> str:
    """The team's namespace."""
    return f"hyperpod-ns-{team}"


def _amounts(resource: Obj) -> dict[str, float]:
    """One ComputeQuotaResources entry → Kubernetes resource amounts."""
    itype = instance_types.get(str(resource["InstanceType"]))
    if itype is None:
        return {}
    per = {"cpu": float(itype.vcpus), "memory": float(itype.memory_gib) * 2**30, "efa": float(itype.efa)}
    acc = GPU if itype.accelerator_kind == "nvidia" else NEURON if itype.accelerator_kind == "neuron" else ""
    if resource.get("Count") is not None:
        ratio = float(resource["Count"])
        accelerators = ratio * itype.accelerators
    else:
        accelerators = float(resource.get("Accelerators") or 0)
        ratio = accelerators / itype.accelerators if itype.accelerators else 0.0
    out = {"cpu": float(resource.get("VCpu") or per["cpu"] * ratio),
           "memory": float(resource.get("MemoryInGiB") or 0) * 2**30 or per["memory"] * ratio}
    if acc:
        out[acc] = accelerators
    if itype.efa:
        out[EFA] = math.floor(per["efa"] * ratio)
    return out


def _quantity(name: str, value: float) -> str:
    if name == "cpu":
        return str(int(value)) if value == int(value) else f"{int(value * 1000)}m"
    if name == "memory":
        return f"{int(value // 2**20)}Mi"
    return str(int(value))


def _limits(sharing: Obj, name: str, nominal: float) -> Obj:
    strategy = sharing.get("Strategy", "LendAndBorrow")
    if strategy == "DontLend":
        return {"borrowingLimit": "0", "lendingLimit": "0"}
    if strategy == "Lend":
        return {"borrowingLimit": "0"}
    percent = float(sharing.get("BorrowLimit", 50))
    return {"borrowingLimit": _quantity(name, nominal * percent / 100.0)}


def _meta(name: str, namespace: str | None = None, quota_id: str = "") -> Obj:
    labels = {MANAGED: "true"}
    if quota_id:
        labels[QUOTA_ID] = quota_id
    meta: Obj = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def cluster_queue(quota: Obj, fair_share: bool) -> Obj:
    """The team's ClusterQueue (one flavor per instance type of the quota)."""
    team = quota["ComputeQuotaTarget"]["TeamName"]
    config = quota.get("ComputeQuotaConfig") or {}
    sharing = config.get("ResourceSharingConfig") or {"Strategy": "LendAndBorrow"}
    flavors: list[Obj] = []
    covered: set[str] = set()
    for resource in config.get("ComputeQuotaResources") or []:
        amounts = _amounts(resource)
        covered.update(amounts)
        flavors.append({"name": str(resource["InstanceType"]), "resources": [
            {"name": n, "nominalQuota": _quantity(n, v), **_limits(sharing, n, v)} for n, v in sorted(amounts.items())
        ]})
    order = sorted(covered)
    for flavor in flavors:  # every flavor of a resource group lists the covered resources in one order
        have = {r["name"]: r for r in flavor["resources"]}
        flavor["resources"] = [have.get(n) or {"name": n, "nominalQuota": "0"} for n in order]
    ns = namespace_of(team)
    spec: Obj = {
        "cohort": COHORT, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"},
                       "withinClusterQueue": "LowerPriority"
                       if config.get("PreemptTeamTasks", "LowerPriority") == "LowerPriority" else "Never"},
        "resourceGroups": [{"coveredResources": order, "flavors": flavors}] if flavors else [],
    }
    if fair_share:
        spec["fairSharing"] = {"weight": str(int(quota["ComputeQuotaTarget"].get("FairShareWeight", 0)))}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": _meta(f"{ns}-clusterqueue", quota_id=quota["ComputeQuotaId"]), "spec": spec}


def desired(scheduler: Obj | None, quotas: list[Obj]) -> list[tuple[TypeKey, Obj]]:
    """Every Kueue object the add-on keeps for this governance, in the order to write them."""
    config = (scheduler or {}).get("SchedulerConfig") or {}
    fair = config.get("FairShare", "Enabled") == "Enabled"
    out: list[tuple[TypeKey, Obj]] = []
    for pc in config.get("PriorityClasses") or []:
        out.append((PRIORITIES, {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass",
                                 "metadata": _meta(f"{pc['Name']}-priority"), "value": int(pc["Weight"])}))
    live = [q for q in quotas if q.get("ActivationState", "Enabled") == "Enabled"]
    types = sorted({str(r["InstanceType"]) for q in live
                    for r in (q.get("ComputeQuotaConfig") or {}).get("ComputeQuotaResources") or []})
    for itype in types:
        out.append((FLAVORS, {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(itype),
                              "spec": {"nodeLabels": {INSTANCE_TYPE_LABEL: itype}}}))
    for quota in live:
        ns = namespace_of(quota["ComputeQuotaTarget"]["TeamName"])
        out.append((CLUSTER_QUEUES, cluster_queue(quota, fair)))
        out.append((LOCAL_QUEUES, {"apiVersion": API_VERSION, "kind": "LocalQueue",
                                   "metadata": _meta(f"{ns}-localqueue", ns, quota["ComputeQuotaId"]),
                                   "spec": {"clusterQueue": f"{ns}-clusterqueue"}}))
    return out


def _put(sim: ClusterSim, key: TypeKey, body: Obj) -> None:
    meta = body["metadata"]
    current = sim.get(key, meta.get("namespace", ""), meta["name"])
    if current is None:
        sim.create(key, body)
        return
    fields = ("spec", "value")
    if all(current.get(f) == body.get(f) for f in fields) and kobj.meta(current).get("labels") == meta["labels"]:
        return
    new = copy.deepcopy(current)
    for f in fields:
        if f in body:
            new[f] = copy.deepcopy(body[f])
    new["metadata"]["labels"] = dict(meta["labels"])
    new["metadata"].pop("resourceVersion", None)
    sim.update(key, new)


def sync(sim: ClusterSim) -> list[str]:
    """Make the cluster's Kueue objects match the governance kept in sim.extra (nothing while Kueue's CRDs are
    not served: the add-on is not installed); returns what it wrote or removed."""
    scheduler, quotas = sim.extra.get(KEY) or (None, [])
    if sim.rtype(CLUSTER_QUEUES) is None:
        return []
    wanted = desired(scheduler, quotas)
    done: list[str] = []
    for key, body in wanted:
        meta = body["metadata"]
        if key == LOCAL_QUEUES and sim.get(NAMESPACES, "", meta["namespace"]) is None:
            labels = {"kubernetes.io/metadata.name": meta["namespace"], MANAGED: "true"}
            sim.create(NAMESPACES, {"metadata": {"name": meta["namespace"], "labels": labels},
                                    "spec": {}, "status": {"phase": "Active"}})
            done.append(f"Namespace/{meta['namespace']}")
        _put(sim, key, body)
        done.append(f"{body['kind']}/{meta['name']}")
    keep = {(key, body["metadata"].get("namespace", ""), body["metadata"]["name"]) for key, body in wanted}
    for key in (LOCAL_QUEUES, CLUSTER_QUEUES, FLAVORS, PRIORITIES):
        for obj in sim.list(key):
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(MANAGED) == "true" and (key, meta.get("namespace", ""),
                                                                       meta["name"]) not in keep:
                sim.delete(key, meta.get("namespace", ""), meta["name"])
                done.append(f"-{obj.get('kind')}/{meta['name']}")
    return done
