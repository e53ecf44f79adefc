"""Kueue in the twin (installed by the task governance add-on): one Workload per HyperPodPyTorchJob that names a
LocalQueue, admitted in priority then creation order when its ClusterQueue has quota (its own nominal quota, or
idle quota borrowed from its cohort within borrowingLimit), else left pending with Kueue's reason. A workload
whose queue is entitled to the quota (within nominal) but finds it lent out reclaims it: the newest, lowest-
priority workloads of queues borrowing in the cohort are evicted (Evicted/Preempted, reason InCohortReclamation)
and requeued; with withinClusterQueue LowerPriority, a workload that still does not fit evicts lower-priority
workloads of its own queue (reason InClusterQueue). Admission unsuspends the job (spec.runPolicy.suspend: false),
eviction suspends it again, which removes its pods; the job webhook (`kube/kueue_webhook.py`) suspends a queued
job at creation. Not modelled: fair sharing weights (borrowing is first come, first served), partial admission,
topology, admission checks."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable
from typing import Any

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.governance_sync import (
    CLUSTER_QUEUES,
    FLAVORS,
    GROUP,
    INSTANCE_TYPE_LABEL,
    LOCAL_QUEUES,
    PRIORITIES,
)
from hyperpod_twin.sim.kinds import TypeKey
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.kueue_quota import Queue, fit, parse_queue
from hyperpod_twin.sim.training import HPJOBS

WORKLOADS: TypeKey = (GROUP, "workloads")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
ALL = "all"
_FINISHED = ("Completed", "Failed")


def workload_name(job: Obj) -> str:
    """Kueue's name for a job's Workload: <kind>-<job name>-<uid prefix>."""
    return f"hyperpodpytorchjob-{job['metadata']['name']}"[:56] + "-" + str(job["metadata"]["uid"])[:5]


def _pod_sets(job: Obj) -> list[Obj]:
    sets = []
    for rs in (job.get("spec") or {}).get("replicaSpecs") or []:
        spec = (rs.get("template") or {}).get("spec") or {}
        containers = [{"name": c.get("name", "main"), "image": c.get("image", ""),
                       "resources": copy.deepcopy(c.get("resources") or {})} for c in spec.get("containers") or []]
        tmpl: Obj = {"spec": {"containers": containers}}
        if spec.get("nodeSelector"):
            tmpl["spec"]["nodeSelector"] = dict(spec["nodeSelector"])
        sets.append({"name": rs.get("name") or "pod", "count": int(rs.get("replicas", 1)), "template": tmpl})
    return sets


def _needs(wl: Obj) -> dict[str, float]:
    total: dict[str, float] = {}
    for ps in wl["spec"]["podSets"]:
        for res, amount in kobj.pod_requests(ps["template"]).items():
            total[res] = total.get(res, 0.0) + amount * int(ps.get("count", 1))
    return total


class KueueController(Controller):
    """Kueue's workload controller and scheduler, one pass over every queue at a time."""

    watches = (HPJOBS, WORKLOADS, CLUSTER_QUEUES, LOCAL_QUEUES, FLAVORS, PRIORITIES)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == HPJOBS and QUEUE_LABEL not in (kobj.meta(event.object).get("labels") or {}):
            return []
        return [ALL]

    def resync_keys(self) -> Iterable[Hashable]:
        return [ALL]

    def reconcile(self, key: Hashable) -> None:
        if self.sim.rtype(WORKLOADS) is None:
            return
        jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self.sim.list(HPJOBS)
                if QUEUE_LABEL in (j["metadata"].get("labels") or {}) and not j["metadata"].get("deletionTimestamp")}
        workloads = self._workloads(jobs)
        queues = {cq["metadata"]["name"]: parse_queue(cq) for cq in self.sim.list(CLUSTER_QUEUES)}
        local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): lq for lq in self.sim.list(LOCAL_QUEUES)}
        for wl in workloads.values():
            if kobj.is_true(wl, "QuotaReserved") and not kobj.is_true(wl, "Finished"):
                admission = wl["status"]["admission"]
                queue = queues.get(admission["clusterQueue"])
                if queue is not None:
                    flavor = admission["podSetAssignments"][0]["flavors"]
                    for res, amount in _needs(wl).items():
                        queue.used[(flavor.get(res, ""), res)] += amount
        pending = sorted((wl for wl in workloads.values() if not kobj.is_true(wl, "QuotaReserved")
                          and not kobj.is_true(wl, "Finished")),
                         key=lambda w: (-int(w["spec"].get("priority") or 0), w["metadata"]["creationTimestamp"]))
        for wl in pending:
            self._schedule(wl, workloads, queues, local)
        for job_key, job in jobs.items():
            own = workloads.get(job_key)
            if own is not None:
                self._suspend(job, not kobj.is_true(own, "Admitted") or kobj.is_true(own, "Finished"))
        self._queue_status(queues, local, workloads)

    # -- workloads -----------------------------------------------------------------------------------
    def _workloads(self, jobs: dict[tuple[str, str], Obj]) -> dict[tuple[str, str], Obj]:
        """Each queued job's Workload (created when missing, Finished once the job is), keyed by the job."""
        out: dict[tuple[str, str], Obj] = {}
        for wl in self.sim.list(WORKLOADS):
            owner = kobj.controller_of(wl)
            job_key = (wl["metadata"]["namespace"], (owner or {}).get("name", ""))
            if job_key not in jobs or jobs[job_key]["metadata"]["uid"] != (owner or {}).get("uid"):
                self.sim.delete(WORKLOADS, wl["metadata"]["namespace"], wl["metadata"]["name"])
                continue
            out[job_key] = wl
        for job_key, job in jobs.items():
            found = out.get(job_key) or self._create_workload(job)
            if found is None:
                continue
            wl = found
            done = next((c for c in _FINISHED if kobj.is_true(job, c)), None)
            if done and not kobj.is_true(wl, "Finished"):
                status = copy.deepcopy(wl.get("status") or {})
                kobj.set_condition(status, "Finished", "True", self.sim.now(), "Succeeded" if done == "Completed"
                                   else "Failed", f"Job {done.lower()}")
                wl = self.sim.patch_status(WORKLOADS, wl, status)
            out[job_key] = wl
        return out

    def _create_workload(self, job: Obj) -> Obj | None:
        labels = job["metadata"].get("labels") or {}
        spec: Obj = {"queueName": labels[QUEUE_LABEL], "podSets": _pod_sets(job), "active": True}
        pclass = labels.get(PRIORITY_LABEL)
        found = self.sim.get(PRIORITIES, "", pclass) if pclass else None
        if found is not None:
            spec.update(priorityClassName=pclass, priorityClassSource="kueue.x-k8s.io/workloadpriorityclass",
                        priority=int(found.get("value") or 0))
        body = {"apiVersion": f"{GROUP}/v1beta1", "kind": "Workload",
                "metadata": {"name": workload_name(job), "namespace": job["metadata"]["namespace"],
                             "labels": {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]},
                             "ownerReferences": [kobj.owner_ref(job)]}, "spec": spec}
        return self.sim.create(WORKLOADS, body)

    # -- scheduling ----------------------------------------------------------------------------------
    def _schedule(self, wl: Obj, workloads: dict[tuple[str, str], Obj], queues: dict[str, Queue],
                  local: dict[tuple[str, str], Obj]) -> None:
        ns, now = wl["metadata"]["namespace"], self.sim.now()
        status = copy.deepcopy(wl.get("status") or {})
        lq = local.get((ns, wl["spec"]["queueName"]))
        queue = queues.get(str(((lq or {}).get("spec") or {}).get("clusterQueue")))
        if lq is None or queue is None:
            what = (f"LocalQueue {wl['spec']['queueName']}" if lq is None
                    else f"ClusterQueue {lq['spec']['clusterQueue']}")
            kobj.set_condition(status, "QuotaReserved", "False", now, "Inadmissible", f"{what} doesn't exist")
            self.sim.patch_status(WORKLOADS, wl, status)
            return
        need, pod_set = _needs(wl), wl["spec"]["podSets"][0]["name"]
        flavor = self._flavor(wl, queue)
        verdict = fit(queue, list(queues.values()), flavor, need, pod_set)
        if not verdict.fits and verdict.within_nominal and self._reclaim(wl, queue, flavor, need, workloads, queues,
                                                                         cohort=True):
            verdict = fit(queue, list(queues.values()), flavor, need, pod_set)
        if not verdict.fits and queue.preempts_lower and self._reclaim(wl, queue, flavor, need, workloads, queues,
                                                                       cohort=False):
            verdict = fit(queue, list(queues.values()), flavor, need, pod_set)
        if not verdict.fits:
            kobj.set_condition(status, "QuotaReserved", "False", now, "Pending", verdict.reason)
            self.sim.patch_status(WORKLOADS, wl, status)
            return
        for res, amount in need.items():
            queue.used[(flavor, res)] += amount
        status["admission"] = {"clusterQueue": queue.name, "podSetAssignments": [
            {"name": ps["name"], "count": int(ps.get("count", 1)), "flavors": {r: flavor for r in need},
             "resourceUsage": {r: kobj.format_quantity(r, a * int(ps.get("count", 1)))
                               for r, a in kobj.pod_requests(ps["template"]).items()}}
            for ps in wl["spec"]["podSets"]]}
        kobj.set_condition(status, "QuotaReserved", "True", now, "QuotaReserved",
                           f"Quota reserved in ClusterQueue {queue.name}")
        kobj.set_condition(status, "Admitted", "True", now, "Admitted", "The workload is admitted")
        for ctype in ("Evicted", "Preempted"):
            if kobj.condition(wl, ctype):
                kobj.set_condition(status, ctype, "False", now, "QuotaReserved", "Previously: "
                                   + str((kobj.condition(wl, ctype) or {}).get("message", "")))
        if kobj.condition(wl, "Requeued"):
            kobj.set_condition(status, "Requeued", "False", now, "QuotaReserved", "")
        self.sim.patch_status(WORKLOADS, wl, status)
        self.sim.event(wl, "Admitted", f"Admitted by ClusterQueue {queue.name}"
                       + (", borrowing idle quota of its cohort" if verdict.borrows else ""), source="kueue-admission")

    def _flavor(self, wl: Obj, queue: Queue) -> str:
        """The flavor whose node labels the pods' node selector matches (else the queue's first)."""
        wanted = (wl["spec"]["podSets"][0]["template"]["spec"].get("nodeSelector") or {}).get(INSTANCE_TYPE_LABEL)
        for name in queue.flavors:
            labels = ((self.sim.get(FLAVORS, "", name) or {}).get("spec") or {}).get("nodeLabels") or {}
            if wanted is not None and labels.get(INSTANCE_TYPE_LABEL) == wanted:
                return name
        return queue.flavors[0] if queue.flavors else ""

    def _reclaim(self, wl: Obj, queue: Queue, flavor: str, need: dict[str, float],
                 workloads: dict[tuple[str, str], Obj], queues: dict[str, Queue], *, cohort: bool) -> bool:
        """Evict, lowest priority and newest first, until `wl` fits (nothing is evicted unless that is enough):
        with `cohort`, workloads of other queues of the cohort that borrow (reclaiming lent quota); else
        workloads of `wl`'s own queue of lower priority (withinClusterQueue: LowerPriority)."""
        mine = int(wl["spec"].get("priority") or 0)
        candidates = []
        for other in workloads.values():
            admission = (other.get("status") or {}).get("admission") or {}
            lender = queues.get(str(admission.get("clusterQueue")))
            if lender is None or not kobj.is_true(other, "Admitted") or kobj.is_true(other, "Finished"):
                continue
            priority = int(other["spec"].get("priority") or 0)
            if (cohort and lender is not queue and lender.cohort == queue.cohort
                    and any(lender.borrowed((flavor, r)) > 0 for r in need)) or (
                    not cohort and lender is queue and priority < mine):
                candidates.append((priority, str((kobj.condition(other, "QuotaReserved") or {}).get(
                    "lastTransitionTime")), other, lender))
        candidates.sort(key=lambda c: (c[0], [-ord(ch) for ch in c[1]]))
        chosen: list[tuple[Obj, Queue]] = []
        for _, _, victim, lender in candidates:
            if cohort and not any(lender.borrowed((flavor, r)) > 0 for r in need):
                continue
            for res, amount in _needs(victim).items():
                lender.used[(flavor, res)] -= amount
            chosen.append((victim, lender))
            if fit(queue, list(queues.values()), flavor, need, "").fits:
                for victim_wl, _ in chosen:
                    self._evict(victim_wl, wl, queue, cohort=cohort)
                return True
        for victim, lender in chosen:  # not enough: give the usage back, evict nobody
            for res, amount in _needs(victim).items():
                lender.used[(flavor, res)] += amount
        return False

    def _evict(self, victim: Obj, preemptor: Obj, queue: Queue, *, cohort: bool) -> None:
        now, status = self.sim.now(), copy.deepcopy(victim.get("status") or {})
        uid = preemptor["metadata"]["uid"]
        if cohort:
            reason = "InCohortReclamation"
            message = (f"Preempted to accommodate a workload (UID: {uid}) due to reclamation within the cohort "
                       f"(ClusterQueue {queue.name} reclaimed its lent quota)")
        else:
            reason = "InClusterQueue"
            message = (f"Preempted to accommodate a workload (UID: {uid}) due to prioritization in the "
                       f"ClusterQueue {queue.name} (a higher-priority workload of the same team)")
        kobj.set_condition(status, "Evicted", "True", now, "Preempted", message)
        kobj.set_condition(status, "Preempted", "True", now, reason, message)
        kobj.set_condition(status, "QuotaReserved", "False", now, "Pending", "Preempted; requeued")
        kobj.set_condition(status, "Admitted", "False", now, "NoReservation", "The workload has no reservation")
        kobj.set_condition(status, "Requeued", "True", now, "Preempted", "Requeued after preemption")
        status.pop("admission", None)
        self.sim.patch_status(WORKLOADS, victim, status)
        self.sim.event(victim, "Preempted", message, etype="Normal", source="kueue-admission")

    def _suspend(self, job: Obj, suspend: bool) -> None:
        run_policy = (job.get("spec") or {}).get("runPolicy") or {}
        if bool(run_policy.get("suspend")) == suspend:
            return
        new = copy.deepcopy(job)
        new["spec"].setdefault("runPolicy", {})["suspend"] = suspend
        new["metadata"].pop("resourceVersion", None)
        self.sim.update(HPJOBS, new)

    # -- queue status --------------------------------------------------------------------------------
    def _queue_status(self, queues: dict[str, Queue], local: dict[tuple[str, str], Obj],
                      workloads: dict[tuple[str, str], Obj]) -> None:
        counts: dict[str, list[int]] = {}
        for (ns, _), wl in workloads.items():
            if kobj.is_true(wl, "Finished"):
                continue
            lq = local.get((ns, wl["spec"]["queueName"]))
            cq_name = str(((lq or {}).get("spec") or {}).get("clusterQueue"))
            for name in (cq_name, f"{ns}/{wl['spec']['queueName']}"):
                pair = counts.setdefault(name, [0, 0])
                pair[0 if kobj.is_true(wl, "Admitted") else 1] += 1
        for cq in self.sim.list(CLUSTER_QUEUES):
            queue = queues.get(cq["metadata"]["name"])
            if queue is None:
                continue
            admitted, pending = counts.get(queue.name, [0, 0])
            usage = [{"name": f, "resources": [
                {"name": r, "total": kobj.format_quantity(r, queue.used[(f, r)]),
                 "borrowed": kobj.format_quantity(r, queue.borrowed((f, r)))} for r in sorted(queue.covered)]}
                for f in queue.flavors]
            status: dict[str, Any] = {**(cq.get("status") or {}), "admittedWorkloads": admitted,
                                      "reservingWorkloads": admitted, "pendingWorkloads": pending,
                                      "flavorsUsage": usage, "flavorsReservation": usage}
            kobj.set_condition(status, "Active", "True", self.sim.now(), "Ready", "Can admit new workloads")
            self.sim.patch_status(CLUSTER_QUEUES, cq, status)
        for (ns, name), lq in local.items():
            admitted, pending = counts.get(f"{ns}/{name}", [0, 0])
            lq_status: dict[str, Any] = {**(lq.get("status") or {}), "admittedWorkloads": admitted,
                                         "reservingWorkloads": admitted, "pendingWorkloads": pending}
            kobj.set_condition(lq_status, "Active", "True", self.sim.now(), "Ready", "Can submit new workloads to "
                               "localQueue")
            self.sim.patch_status(LOCAL_QUEUES, lq, lq_status)
