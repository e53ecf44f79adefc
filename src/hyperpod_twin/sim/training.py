"""The HyperPod training operator: HyperPodPyTorchJob → one pod per replica, rank env, restarts, status."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import PODS, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.log_monitor import LogMonitors

HPJOBS: TypeKey = ("sagemaker.amazonaws.com", "hyperpodpytorchjobs")
JOB_LABEL = "HPJob"  # the label the HyperPod tooling selects a job's pods by
REPLICA_LABEL = "replica-spec-name"
MASTER_PORT = "23456"
_TERMINAL = ("Completed", "Failed")


def _gpus(container: Obj) -> int:
    res = container.get("resources") or {}
    for source in (res.get("limits") or {}, res.get("requests") or {}):
        for key in ("nvidia.com/gpu", "aws.amazon.com/neuroncore", "aws.amazon.com/neurondevice"):
            if key in source:
                return int(kobj.quantity(source[key]))
    return 0


def nproc_per_node(job: Obj, container: Obj) -> int:
    """spec.nprocPerNode: an integer, or auto/gpu (accelerators the container asks for) or cpu."""
    value = str(job.get("spec", {}).get("nprocPerNode", "auto")).strip().lower()
    if value.isdigit():
        return max(int(value), 1)
    if value == "cpu":
        res = container.get("resources") or {}
        cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")
        return max(int(kobj.quantity(cpu)), 1) if cpu else 1
    return max(_gpus(container), 1)


class TrainingOperator(OwnerController):
    """Reconciles HyperPodPyTorchJobs once the training operator's CRD is installed.

    Pods are named `<job>-<replicaSpec>-<index>`, labelled `HPJob=<job>`, and get NNODES,
    NPROC_PER_NODE, NODE_RANK, WORLD_SIZE, MASTER_ADDR/PORT and JOB_RESTART_COUNT. When a pod fails
    or vanishes (its node was removed) the job restarts per runPolicy: the failed pod alone while
    `restartPolicy.numRestartBeforeFullJobRestart` allows, else every pod, up to `jobMaxRetryCount`
    restarts in all; then the job fails. Conditions: Created, Running, Restarting, Completed, Failed.
    """

    primary = HPJOBS
    owns = {PODS: "HyperPodPyTorchJob"}

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._live: dict[tuple[str, str], dict[str, str]] = {}  # job → pod name → uid of this attempt
        self._pod_restarts: dict[tuple[str, str], int] = {}
        self.monitors = LogMonitors(sim)

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        job = self.sim.get(HPJOBS, ns, name)
        if job is None:
            self._live.pop((ns, name), None)
            self._pod_restarts.pop((ns, name), None)
            return
        if job["metadata"].get("deletionTimestamp"):
            return
        status = copy.deepcopy(job.get("status") or {})
        now = self.sim.now()
        if not kobj.condition(job, "Created"):
            kobj.set_condition(status, "Created", "True", now, "JobCreated", f"HyperPodPyTorchJob {name} is created.")
        owned = self.sim.owned(PODS, job)
        # Pods being deleted (their grace period running) no longer count; their names stay taken until
        # the kubelet's final delete, which requeues this job.
        going = {p["metadata"]["name"] for p in owned if p["metadata"].get("deletionTimestamp")}
        pods = {p["metadata"]["name"]: p for p in owned if p["metadata"]["name"] not in going}
        if any(kobj.is_true(job, c) for c in _TERMINAL):
            self._clean(job, pods)
            self._write(job, status, pods)
            return
        if job.get("spec", {}).get("runPolicy", {}).get("suspend"):
            for pod_name in pods:
                self.sim.delete_pod(ns, pod_name)
            self._live.pop((ns, name), None)  # pods removed by suspension are no failure when it resumes
            if kobj.is_true(job, "Running"):
                kobj.set_condition(status, "Running", "False", now, "JobSuspended", f"HyperPodPyTorchJob {name} "
                                   "is suspended.")
            self._write(job, status, {})
            return
        if self._past_deadline(job, status, pods):
            return
        wanted = self._desired_pods(job, int(status.get("restartCount", 0)))
        live = self._live.setdefault((ns, name), {})
        failed = [n for n, p in pods.items() if p.get("status", {}).get("phase") == "Failed"]
        vanished = [n for n, uid in live.items() if n not in pods or pods[n]["metadata"]["uid"] != uid]
        if failed or vanished:
            self._on_failure(job, status, pods, failed + vanished)
            return
        for pod_name, pod in wanted.items():
            if pod_name in going:
                continue
            if pod_name not in pods:
                created = self.sim.create(PODS, pod)
                if created is not None:
                    pods[pod_name] = created
                    live[pod_name] = created["metadata"]["uid"]
            else:
                live[pod_name] = pods[pod_name]["metadata"]["uid"]
        verdict = self.monitors.check(job, pods)
        if verdict.hanging:
            self._on_failure(job, status, pods, sorted(verdict.hanging), verdict.hanging)
            return
        if verdict.next_due is not None:
            self.sim.requeue(self, (ns, name), verdict.next_due + 0.01)
        phases = [pods[n].get("status", {}).get("phase") for n in wanted if n in pods]
        if wanted and all(ph == "Succeeded" for ph in phases) and len(phases) == len(wanted):
            kobj.set_condition(status, "Running", "False", now, "JobCompleted")
            kobj.set_condition(status, "Restarting", "False", now, "JobCompleted")
            kobj.set_condition(
                status, "Completed", "True", now, "JobCompleted", f"HyperPodPyTorchJob {name} completed."
            )
            status["completionTime"] = now
            self._expire(job)
            self.sim.event(
                job,
                "JobCompleted",
                f"HyperPodPyTorchJob {name} completed successfully",
                source="hyperpod-training-operator",
            )
            self._clean(job, pods)
        elif wanted and all(ph in ("Running", "Succeeded") for ph in phases) and len(phases) == len(wanted):
            status.setdefault("startTime", now)
            kobj.set_condition(status, "Running", "True", now, "JobRunning", f"HyperPodPyTorchJob {name} is running.")
            kobj.set_condition(status, "Restarting", "False", now, "JobRunning")
        self._write(job, status, pods)

    # -- pods ----------------------------------------------------------------------------------------
    def _desired_pods(self, job: Obj, restart_count: int) -> dict[str, Obj]:
        name = job["metadata"]["name"]
        specs = job.get("spec", {}).get("replicaSpecs") or []
        nnodes = sum(int(rs.get("replicas", 1)) for rs in specs)
        out: dict[str, Obj] = {}
        rank = 0
        master = ""
        for rs in specs:
            rs_name = rs.get("name") or "pod"
            template = rs.get("template") or {}
            containers = (template.get("spec") or {}).get("containers") or [{}]
            nproc = nproc_per_node(job, containers[0])
            for index in range(int(rs.get("replicas", 1))):
                pod_name = f"{name}-{rs_name}-{index}"
                master = master or pod_name
                env = {
                    "NNODES": str(nnodes),
                    "NPROC_PER_NODE": str(nproc),
                    "NODE_RANK": str(rank),
                    "GROUP_RANK": str(rank),
                    "WORLD_SIZE": str(nnodes * nproc),
                    "MASTER_ADDR": master,
                    "MASTER_PORT": MASTER_PORT,
                    "JOB_RESTART_COUNT": str(restart_count),
                }
                tmpl = copy.deepcopy(template)
                for container in (tmpl.setdefault("spec", {})).get("containers") or []:
                    existing = [e for e in container.get("env") or [] if e.get("name") not in env]
                    container["env"] = existing + [{"name": k, "value": v} for k, v in env.items()]
                tmpl["spec"].setdefault("restartPolicy", "Never")
                tmpl["spec"].setdefault("hostname", pod_name)
                labels = {JOB_LABEL: name, REPLICA_LABEL: rs_name, "replica-index": str(index)}
                annotations = {kobj.ATTEMPT: str(restart_count)}
                out[pod_name] = kobj.pod_from_template(tmpl, job, name=pod_name, labels=labels, annotations=annotations)
                rank += 1
        return out

    def _on_failure(
        self, job: Obj, status: Obj, pods: dict[str, Obj], failed: list[str], why: dict[str, str] | None = None
    ) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        now = self.sim.now()
        run_policy = job.get("spec", {}).get("runPolicy") or {}
        restart_policy = run_policy.get("restartPolicy") or {}
        max_retries = int(run_policy.get("jobMaxRetryCount", 0) or 0)
        restarts = int(status.get("restartCount", 0))
        live = self._live.setdefault((ns, name), {})
        reason = ", ".join(f"{n} ({why[n]})" if why and n in why else n for n in sorted(failed))
        if restarts >= max_retries:
            for pod_name, pod in pods.items():
                if kobj.pod_is_active(pod):
                    self.sim.delete_pod(ns, pod_name)
            kobj.set_condition(status, "Running", "False", now, "JobFailed")
            kobj.set_condition(status, "Restarting", "False", now, "JobFailed")
            kobj.set_condition(
                status,
                "Failed",
                "True",
                now,
                "JobFailed",
                f"pods failed ({reason}); restarts exhausted ({restarts}/{max_retries})",
            )
            status["completionTime"] = now
            self._expire(job)
            self.sim.event(
                job,
                "JobFailed",
                f"HyperPodPyTorchJob {name} failed: {reason}",
                "Warning",
                source="hyperpod-training-operator",
            )
            live.clear()
            self._write(job, status, pods)
            return
        pod_budget = int(restart_policy.get("numRestartBeforeFullJobRestart", 0) or 0)
        used = self._pod_restarts.get((ns, name), 0)
        if pod_budget and used < pod_budget:
            scope = "pod"
            self._pod_restarts[(ns, name)] = used + 1
            doomed = failed
        else:
            scope = "job"
            self._pod_restarts[(ns, name)] = 0
            status["restartStatus"] = {
                "fullJobRestartCount": int((status.get("restartStatus") or {}).get("fullJobRestartCount", 0)) + 1
            }
            doomed = sorted(set(pods) | set(failed))
        for pod_name in doomed:
            if pod_name in pods:
                self.sim.delete_pod(ns, pod_name)
            live.pop(pod_name, None)
        status["restartCount"] = restarts + 1
        kobj.set_condition(status, "Running", "False", now, "JobRestarting")
        kobj.set_condition(
            status,
            "Restarting",
            "True",
            now,
            "JobRestarting",
            f"{scope}-level restart {restarts + 1}/{max_retries} after failure of {reason}",
        )
        self.sim.event(
            job,
            "JobRestarting",
            f"Restarting ({scope}) after failure of {reason}",
            "Warning",
            source="hyperpod-training-operator",
        )
        self._write(job, status, {n: p for n, p in pods.items() if n not in doomed})
        self.sim.enqueue(self, (ns, name))

    def _clean(self, job: Obj, pods: dict[str, Obj]) -> None:
        policy = (job.get("spec", {}).get("runPolicy") or {}).get("cleanPodPolicy", "All")
        ns = job["metadata"]["namespace"]
        for pod_name, pod in pods.items():
            if policy == "All" or (policy == "Running" and kobj.pod_is_active(pod)):
                self.sim.delete_pod(ns, pod_name)

    def _past_deadline(self, job: Obj, status: Obj, pods: dict[str, Obj]) -> bool:
        """runPolicy.activeDeadlineSeconds: a job running longer fails with DeadlineExceeded."""
        deadline = (job.get("spec", {}).get("runPolicy") or {}).get("activeDeadlineSeconds")
        started = kobj.parse_time(status.get("startTime"))
        if deadline is None or started is None:
            return False
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        remaining = float(deadline) - (self.sim.clock.wall() - started)
        if remaining > 0:
            self.sim.requeue(self, (ns, name), remaining + 0.01)
            return False
        now = self.sim.now()
        for pod_name, pod in pods.items():
            if kobj.pod_is_active(pod):
                self.sim.delete_pod(ns, pod_name)
        kobj.set_condition(status, "Running", "False", now, "DeadlineExceeded")
        kobj.set_condition(
            status, "Failed", "True", now, "DeadlineExceeded", f"job ran longer than activeDeadlineSeconds={deadline}"
        )
        status["completionTime"] = now
        self._live.pop((ns, name), None)
        self._write(job, status, pods)
        self._expire(job)
        return True

    def _expire(self, job: Obj) -> None:
        """runPolicy.ttlSecondsAfterFinished > 0: the finished job (and, by GC, its pods) is deleted."""
        ttl = (job.get("spec", {}).get("runPolicy") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or int(ttl) <= 0:
            return
        ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]

        def delete() -> None:
            current = self.sim.get(HPJOBS, ns, name)
            if current is not None and current["metadata"]["uid"] == uid:
                self.sim.delete(HPJOBS, ns, name)

        self.sim.after(float(ttl), delete)

    def _write(self, job: Obj, status: Obj, pods: dict[str, Obj]) -> None:
        status["jobPods"] = [
            {
                "podName": n,
                "status": p.get("status", {}).get("phase", "Pending"),
                "nodeName": p.get("spec", {}).get("nodeName", ""),
            }
            for n, p in sorted(pods.items())
        ]
        specs = job.get("spec", {}).get("replicaSpecs") or []
        if specs:
            first = specs[0].get("name") or "pod"
            status["masterAddr"] = f"{job['metadata']['name']}-{first}-0"
            status["masterPort"] = int(MASTER_PORT)
        status["observedGeneration"] = job["metadata"].get("generation", 1)
        self.sim.patch_status(HPJOBS, job, status)
