"""The twin's Kueue under the task governance add-on: compute quotas become team queues in one cohort, a team
borrows idle quota, the lender reclaims it by preempting the borrowed workload, which is requeued."""

from __future__ import annotations

import copy
from typing import Any

from hyperpod_twin.kube.kueue_webhook import suspend_queued
from hyperpod_twin.sim import governance_sync
from hyperpod_twin.sim.plugin import install_crds
from tests.support.sim import SimCluster, hpjob

K = "kueue.x-k8s.io"


def _quota(team: str, quota_id: str, gpus: int, strategy: str = "LendAndBorrow") -> dict[str, Any]:
    return {"ComputeQuotaId": quota_id, "ActivationState": "Enabled",
            "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 0},
            "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.g5.12xlarge", "Accelerators": gpus}],
                                   "ResourceSharingConfig": {"Strategy": strategy, "BorrowLimit": 100},
                                   "PreemptTeamTasks": "LowerPriority"}}


def _job(cluster: SimCluster, team: str, name: str, gpus: int = 2, priority: str | None = None) -> None:
    body = hpjob(name, 1)
    body["metadata"]["namespace"] = f"hyperpod-ns-{team}"
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": f"hyperpod-ns-{team}-localqueue"}
    if priority:
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
    container = body["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    body["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"]["twin.instantstart.io/run-seconds"] = "600"
    rtype = cluster.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs")
    assert rtype is not None
    suspend_queued(cluster.store, rtype, body)  # what the API server's Kueue webhook does on create
    assert body["spec"]["runPolicy"]["suspend"] is True
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", body)


def _workload(cluster: SimCluster, team: str, job: str) -> dict[str, Any]:
    found = [w for w in cluster.list(K, "workloads", f"hyperpod-ns-{team}")
             if w["metadata"]["ownerReferences"][0]["name"] == job]
    assert len(found) == 1
    return found[0]


def _cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ctype), {})


def _running_pods(cluster: SimCluster, team: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.list("", "pods", f"hyperpod-ns-{team}")
                  if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def _setup(cluster: SimCluster, scheduler: dict[str, Any] | None = None) -> None:
    install_crds(cluster.sim, "training-operator")
    install_crds(cluster.sim, "task-governance")
    cluster.add_node("i-01111111111111111")  # ml.g5.12xlarge: 4 GPUs
    cluster.sim.extra[governance_sync.KEY] = (scheduler, [_quota("a", "aaaaaaaaaaaa", 2),
                                                          _quota("b", "bbbbbbbbbbbb", 2)])
    cluster.sim.run(lambda: governance_sync.sync(cluster.sim))


def test_quotas_become_team_queues_in_one_cohort(cluster: SimCluster) -> None:
    scheduler = {"SchedulerConfig": {"PriorityClasses": [{"Name": "training", "Weight": 50}], "FairShare": "Enabled"}}
    _setup(cluster, scheduler)
    cq = cluster.get(K, "clusterqueues", "hyperpod-ns-a-clusterqueue", "")
    assert cq["spec"]["cohort"] == governance_sync.COHORT
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    gpu = next(r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "2"}
    lq = cluster.get(K, "localqueues", "hyperpod-ns-b-localqueue", "hyperpod-ns-b")
    assert lq["spec"]["clusterQueue"] == "hyperpod-ns-b-clusterqueue"
    assert cluster.get(K, "workloadpriorityclasses", "training-priority", "")["value"] == 50
    ns = cluster.get("", "namespaces", "hyperpod-ns-a", "")
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "hyperpod-ns-a"
    # Team b's quota goes: its queues go with it, the namespace stays.
    cluster.sim.extra[governance_sync.KEY] = (scheduler, [_quota("a", "aaaaaaaaaaaa", 2)])
    cluster.sim.run(lambda: governance_sync.sync(cluster.sim))
    assert [q["metadata"]["name"] for q in cluster.list(K, "clusterqueues")] == ["hyperpod-ns-a-clusterqueue"]
    assert cluster.list(K, "localqueues", "hyperpod-ns-b") == []
    assert cluster.get("", "namespaces", "hyperpod-ns-b", "")


def test_borrow_then_reclaim_preempts_and_requeues_the_borrower(cluster: SimCluster) -> None:
    _setup(cluster)
    _job(cluster, "a", "a1")
    cluster.advance(3)
    _job(cluster, "a", "a2")  # beyond a's 2 GPUs: borrows b's idle ones
    cluster.advance(3)
    assert _running_pods(cluster, "a") == ["a1-pod-0", "a2-pod-0"]
    assert _cond(_workload(cluster, "a", "a2"), "Admitted")["status"] == "True"
    cq = cluster.get(K, "clusterqueues", "hyperpod-ns-a-clusterqueue", "")
    usage = {r["name"]: r for r in cq["status"]["flavorsUsage"][0]["resources"]}
    assert usage["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "total": "4", "borrowed": "2"}
    _job(cluster, "a", "a3")  # a is at its borrowing limit (2 + 100 %): pending with Kueue's reason
    cluster.advance(2)
    pending = _cond(_workload(cluster, "a", "a3"), "QuotaReserved")
    assert pending["status"] == "False" and "request > maximum capacity (6 > 4)" in pending["message"]
    assert cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "a3", "hyperpod-ns-a")["spec"][
        "runPolicy"]["suspend"] is True
    a3 = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "a3", "hyperpod-ns-a")
    cluster.store.delete(cluster.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs"), "hyperpod-ns-a",
                         a3["metadata"]["name"])
    _job(cluster, "b", "b1")  # b needs its lent quota back: the newest borrowing workload of a is preempted
    cluster.advance(40)
    victim = _workload(cluster, "a", "a2")
    assert _cond(victim, "Evicted")["reason"] == "Preempted"
    assert _cond(victim, "Preempted")["reason"] == "InCohortReclamation"
    assert _cond(victim, "Requeued")["status"] == "True" and _cond(victim, "QuotaReserved")["status"] == "False"
    assert _running_pods(cluster, "a") == ["a1-pod-0"] and _running_pods(cluster, "b") == ["b1-pod-0"]
    assert cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "a2", "hyperpod-ns-a")["spec"][
        "runPolicy"]["suspend"] is True
    assert _cond(_workload(cluster, "a", "a1"), "Admitted")["status"] == "True"
    # b's job ends: a's requeued workload is admitted again, borrowing once more.
    b1 = copy.deepcopy(cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "b1", "hyperpod-ns-b"))
    cluster.store.delete(cluster.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs"), "hyperpod-ns-b",
                         b1["metadata"]["name"])
    cluster.advance(40)
    again = _workload(cluster, "a", "a2")
    assert _cond(again, "Admitted")["status"] == "True" and _cond(again, "Evicted")["status"] == "False"
    assert _running_pods(cluster, "a") == ["a1-pod-0", "a2-pod-0"]


def test_dont_lend_keeps_idle_quota_and_webhook_ignores_unqueued_jobs(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    install_crds(cluster.sim, "task-governance")
    cluster.add_node("i-01111111111111111")
    cluster.sim.extra[governance_sync.KEY] = (None, [_quota("a", "aaaaaaaaaaaa", 2),
                                                     _quota("b", "bbbbbbbbbbbb", 2, strategy="DontLend")])
    cluster.sim.run(lambda: governance_sync.sync(cluster.sim))
    _job(cluster, "a", "a1", gpus=4)
    cluster.advance(3)
    reason = _cond(_workload(cluster, "a", "a1"), "QuotaReserved")["message"]
    assert "insufficient unused quota for nvidia.com/gpu in flavor ml.g5.12xlarge, 2 more needed" in reason
    plain = hpjob("plain", 1)
    rtype = cluster.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs")
    assert rtype is not None
    suspend_queued(cluster.store, rtype, plain)
    assert "suspend" not in plain["spec"]["runPolicy"]


def test_instance_count_quota_and_lend_only_strategy() -> None:
    quota = _quota("c", "cccccccccccc", 0, strategy="Lend")
    quota["ComputeQuotaConfig"]["ComputeQuotaResources"] = [{"InstanceType": "ml.g5.12xlarge", "Count": 2}]
    quota["ComputeQuotaConfig"]["PreemptTeamTasks"] = "Never"
    cq = governance_sync.cluster_queue(quota, fair_share=True)
    resources = {r["name"]: r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    # Two ml.g5.12xlarge: 2 x (48 vCPU, 192 GiB, 4 GPUs, 1 EFA); Lend borrows nothing.
    assert resources["cpu"] == {"name": "cpu", "nominalQuota": "96", "borrowingLimit": "0"}
    assert resources["memory"]["nominalQuota"] == f"{2 * 192 * 1024}Mi"
    assert resources["nvidia.com/gpu"]["nominalQuota"] == "8"
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert cq["spec"]["fairSharing"] == {"weight": "0"}
    dont = governance_sync.cluster_queue(_quota("d", "dddddddddddd", 2, strategy="DontLend"), fair_share=False)
    gpu = next(r for r in dont["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "0", "lendingLimit": "0"}
    assert "fairSharing" not in dont["spec"]


def test_higher_priority_task_preempts_its_own_teams_lower_priority_one(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    install_crds(cluster.sim, "task-governance")
    cluster.add_node("i-01111111111111111")
    scheduler = {"SchedulerConfig": {"PriorityClasses": [{"Name": "inference", "Weight": 90},
                                                         {"Name": "training", "Weight": 10}]}}
    cluster.sim.extra[governance_sync.KEY] = (scheduler, [_quota("a", "aaaaaaaaaaaa", 2, strategy="DontLend")])
    cluster.sim.run(lambda: governance_sync.sync(cluster.sim))

    _job(cluster, "a", "low", priority="training-priority")
    cluster.advance(3)
    assert _cond(_workload(cluster, "a", "low"), "Admitted")["status"] == "True"
    _job(cluster, "a", "high", priority="inference-priority")
    cluster.advance(30)
    victim = _workload(cluster, "a", "low")
    assert _cond(victim, "Preempted")["reason"] == "InClusterQueue"
    assert _cond(_workload(cluster, "a", "high"), "Admitted")["status"] == "True"
    assert _workload(cluster, "a", "high")["spec"]["priority"] == 90
    assert _running_pods(cluster, "a") == ["high-pod-0"]
