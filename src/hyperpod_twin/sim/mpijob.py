"""The MPI operator (kubeflow.org/v2beta1 MPIJob, from the HyperPod dependencies chart): workers, then a launcher."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.kinds import PODS, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

MPIJOBS: TypeKey = ("kubeflow.org", "mpijobs")
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
INDEX_LABEL = "training.kubeflow.org/replica-index"


class MPIJobController(OwnerController):
    """Pods `<job>-worker-<i>` (long-running sshd hosts) and, once every worker runs, `<job>-launcher` (mpirun).
    The job Succeeds when the launcher does and Fails when it fails; running workers are then deleted
    (cleanPodPolicy Running, the operator's default)."""

    primary = MPIJOBS
    owns = {PODS: "MPIJob"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        job = self.sim.get(MPIJOBS, ns, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        if kobj.is_true(job, "Succeeded") or kobj.is_true(job, "Failed"):
            return
        now = self.sim.now()
        status = copy.deepcopy(job.get("status") or {})
        if not kobj.condition(job, "Created"):
            kobj.set_condition(status, "Created", "True", now, "MPIJobCreated", f"MPIJob {ns}/{name} is created.")
        specs = (job.get("spec") or {}).get("mpiReplicaSpecs") or {}
        owned = self.sim.owned(PODS, job)
        pods = {p["metadata"]["name"]: p for p in owned if not p["metadata"].get("deletionTimestamp")}
        workers = [f"{name}-worker-{i}" for i in range(int((specs.get("Worker") or {}).get("replicas", 0)))]
        for index, pod_name in enumerate(workers):
            if pod_name not in pods:
                created = self._pod(job, specs["Worker"], pod_name, "worker", index)
                if created is not None:
                    pods[pod_name] = created
        launcher = pods.get(f"{name}-launcher")
        running = all(pods[w].get("status", {}).get("phase") == "Running" for w in workers if w in pods)
        if launcher is None and running and all(w in pods for w in workers) and specs.get("Launcher"):
            launcher = self._pod(job, specs["Launcher"], f"{name}-launcher", "launcher", 0)
        phase = (launcher or {}).get("status", {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            ok = phase == "Succeeded"
            reason = "MPIJobSucceeded" if ok else "MPIJobFailed"
            kobj.set_condition(status, "Running", "False", now, reason)
            kobj.set_condition(status, "Succeeded" if ok else "Failed", "True", now, reason,
                               f"MPIJob {ns}/{name} {'successfully completed' if ok else 'has failed'}.")
            status["completionTime"] = now
            for pod_name, pod in pods.items():
                if pod_name != f"{name}-launcher" and kobj.pod_is_active(pod):
                    self.sim.delete_pod(ns, pod_name)
        elif phase == "Running":
            status.setdefault("startTime", now)
            kobj.set_condition(status, "Running", "True", now, "MPIJobRunning", f"MPIJob {ns}/{name} is running.")
        self.sim.patch_status(MPIJOBS, job, status)

    def _pod(self, job: Obj, spec: Obj, pod_name: str, role: str, index: int) -> Obj | None:
        labels = {JOB_NAME_LABEL: job["metadata"]["name"], ROLE_LABEL: role, INDEX_LABEL: str(index),
                  "training.kubeflow.org/operator-name": "mpi-operator"}
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("spec", {}).setdefault("restartPolicy", spec.get("restartPolicy", "Never"))
        if role == "launcher" and template["spec"]["restartPolicy"] == "Always":
            template["spec"]["restartPolicy"] = "OnFailure"
        # A worker runs sshd until the operator deletes it; only the launcher runs to completion.
        annotations = {kobj.RUN_SECONDS: "1000000000"} if role == "worker" else {}
        pod = kobj.pod_from_template(template, job, name=pod_name, labels=labels, annotations=annotations)
        return self.sim.create(PODS, pod)
