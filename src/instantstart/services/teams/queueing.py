"""Why a queued job waits or runs as it does, from Kueue: its Workload's conditions (QuotaReserved, Admitted,
Evicted, Preempted, Requeued, Finished) and its ClusterQueue's quota and usage. A job admitted while its team
uses more than its nominal quota runs on borrowed capacity: the newest admissions are the borrowing ones (Kueue
reclaims in that order)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.errors import NotFound
from instantstart.kube import custom_objects, reads
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests.training import KIND, QUEUE_LABEL
from instantstart.store.models import ClusterRow

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
ACCELERATORS = ("nvidia.com/gpu", "aws.amazon.com/neurondevice")
State = Literal["waiting-for-kueue", "pending", "admitted", "borrowing", "preempted", "finished"]


class QueueState(WireModel):
    """A queued job as Kueue sees it."""

    state: State = Field(description="pending: over its team's quota (or the cohort has no idle capacity); "
                         "admitted: within its team's quota; borrowing: admitted on idle capacity lent by other "
                         "teams, which they reclaim by preempting it; preempted: evicted and requeued, waiting "
                         "for quota again; finished.")
    explanation: str
    queue: str
    cluster_queue: str | None = None
    workload: str | None = None
    quota: dict[str, float] = Field(default_factory=dict, description="The team's nominal accelerator quota.")
    in_use: dict[str, float] = Field(default_factory=dict, description="Accelerators its admitted jobs use.")
    conditions: list[dict[str, Any]] = Field(default_factory=list, description="The Workload's conditions.")


def _cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


def _true(obj: dict[str, Any], ctype: str) -> bool:
    return _cond(obj, ctype).get("status") == "True"


def _number(value: Any) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _accelerators(workload: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for res, amount in (assignment.get("resourceUsage") or {}).items():
            if res in ACCELERATORS:
                out[res] = out.get(res, 0.0) + _number(amount)
    return out


def _nominal(cq: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res["name"] in ACCELERATORS:
                    out[res["name"]] = out.get(res["name"], 0.0) + _number(res["nominalQuota"])
    return out


def _borrowing(mine: dict[str, Any], admitted: list[dict[str, Any]], nominal: dict[str, float]) -> bool:
    """Whether `mine` is among the admissions past the nominal quota (in admission order)."""
    used: dict[str, float] = {}
    for wl in sorted(admitted, key=lambda w: (str(_cond(w, "QuotaReserved").get("lastTransitionTime")),
                                              w["metadata"]["name"])):
        for res, amount in _accelerators(wl).items():
            used[res] = used.get(res, 0.0) + amount
        if wl["metadata"]["name"] == mine["metadata"]["name"]:
            return any(used[r] > nominal.get(r, 0.0) for r in used)
    return False


def _fmt(values: dict[str, float]) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in sorted(values.items())) or "none"


def list_workloads(api: Api, namespace: str | None) -> list[dict[str, Any]]:
    """The Kueue Workloads of `namespace` (every namespace when None); NotFound when the cluster has no Workload
    kind (Kueue, the task governance add-on, not installed)."""
    found: Any = kube_call("list Kueue workloads", custom_objects.list_custom, api, GROUP, VERSION, "workloads",
                           namespace)
    return [w for w in found.get("items") or [] if isinstance(w, dict)]


def queue_state(app: AppContext, row: ClusterRow, job: dict[str, Any]) -> QueueState | None:
    """The Kueue state of a HyperPodPyTorchJob that names a queue (None for one that does not; blocking)."""
    meta = job.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    if not queue:
        return None
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    try:
        found = list_workloads(api, meta["namespace"])
        local: Any = kube_call("read the LocalQueue", custom_objects.get_custom, api, GROUP, VERSION,
                               meta["namespace"], "localqueues", queue)
    except NotFound as exc:
        return QueueState(state="waiting-for-kueue", queue=queue, explanation=f"Kueue cannot queue it: {exc} Is "
                          "task governance enabled and the team's quota in place (team_list)?")
    cq_name = str((local.get("spec") or {}).get("clusterQueue"))
    cq: Any = kube_call("read the ClusterQueue", reads.read_cluster_object, api, GROUP, VERSION, "clusterqueues",
                        cq_name)
    if cq is None:
        return QueueState(state="waiting-for-kueue", queue=queue, cluster_queue=cq_name, explanation=(
            f"Kueue cannot admit it: ClusterQueue {cq_name} does not exist (was the team's quota deleted?)."))
    workloads = [w for w in found
                 if any(o.get("kind") == KIND and o.get("name") == meta.get("name")
                        for o in w["metadata"].get("ownerReferences") or [])]
    if not workloads:
        return QueueState(state="waiting-for-kueue", queue=queue, cluster_queue=cq_name,
                          explanation="Kueue has not created the job's Workload yet.")
    wl = workloads[0]
    nominal = _nominal(cq)
    admitted = [w for w in found if _true(w, "Admitted") and not _true(w, "Finished")]
    in_use: dict[str, float] = {}
    for other in admitted:
        for res, amount in _accelerators(other).items():
            in_use[res] = in_use.get(res, 0.0) + amount
    base = {"queue": queue, "cluster_queue": cq_name, "workload": wl["metadata"]["name"], "quota": nominal,
            "in_use": in_use, "conditions": list((wl.get("status") or {}).get("conditions") or [])}
    team_use = f"the team's quota is {_fmt(nominal)}, its admitted jobs use {_fmt(in_use)}"
    if _true(wl, "Finished"):
        return QueueState(state="finished", explanation="The job finished; its quota is released.", **base)
    if _true(wl, "Admitted"):
        if _borrowing(wl, admitted, nominal):
            return QueueState(state="borrowing", explanation=(
                f"Admitted on borrowed capacity: {team_use}, beyond it on idle capacity lent by other teams of the "
                "cohort. When a lending team needs its quota back, this job is preempted and requeued."), **base)
        return QueueState(state="admitted", explanation=f"Admitted within the team's quota ({team_use}).", **base)
    waiting = _cond(wl, "QuotaReserved").get("message") or "waiting for quota"
    if _true(wl, "Evicted") or _true(wl, "Preempted"):
        why = _cond(wl, "Preempted").get("message") or _cond(wl, "Evicted").get("message")
        cause = ("a higher-priority job of the same team needed the team's quota"
                 if _cond(wl, "Preempted").get("reason") == "InClusterQueue"
                 else "it ran on borrowed capacity, which its lender reclaimed")
        return QueueState(state="preempted", explanation=(
            f"Preempted and requeued: {why}. {cause[0].upper()}{cause[1:]}; it is admitted again when quota frees "
            f"up ({team_use}; Kueue: {waiting})."), **base)
    return QueueState(state="pending", explanation=(
        f"Pending in queue {queue}: over the team's quota and no idle capacity to borrow ({team_use}). "
        f"Kueue: {waiting}."), **base)


class QueueUsage(WireModel):
    """A team's Kueue queue now: admitted and pending jobs, accelerators in use and borrowed."""

    admitted_workloads: int
    pending_workloads: int
    in_use: dict[str, float] = Field(description="Accelerators its admitted jobs hold.")
    borrowed: dict[str, float] = Field(description="Of those, beyond the team's quota (lent by other teams).")


def queue_usage(app: AppContext, row: ClusterRow, cluster_queue: str) -> QueueUsage | None:
    """The ClusterQueue's status (None while it does not exist; blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    cq: Any = kube_call("read the ClusterQueue", reads.read_cluster_object, api, GROUP, VERSION, "clusterqueues",
                        cluster_queue)
    if cq is None:
        return None
    status = cq.get("status") or {}
    in_use: dict[str, float] = {}
    borrowed: dict[str, float] = {}
    for flavor in status.get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            if res["name"] in ACCELERATORS:
                in_use[res["name"]] = in_use.get(res["name"], 0.0) + _number(res.get("total") or 0)
                borrowed[res["name"]] = borrowed.get(res["name"], 0.0) + _number(res.get("borrowed") or 0)
    return QueueUsage(admitted_workloads=int(status.get("admittedWorkloads") or 0),
                      pending_workloads=int(status.get("pendingWorkloads") or 0), in_use=in_use, borrowed=borrowed)
