"""Kubeflow training operator (from the HyperPod dependencies chart): PyTorchJob → master/worker pods."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import PODS, SERVICES, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

PYTORCHJOBS: TypeKey = ("kubeflow.org", "pytorchjobs")
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"
ROLE_LABEL = "training.kubeflow.org/job-role"
AUTO_RESUME = "sagemaker.amazonaws.com/enable-job-auto-resume"
MAX_RETRY = "sagemaker.amazonaws.com/job-max-retry-count"
MASTER_PORT = 23456
_ORDER = ("Master", "Worker")


def _replica_specs(job: Obj) -> list[tuple[str, Obj]]:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return sorted(specs.items(), key=lambda kv: (_ORDER.index(kv[0]) if kv[0] in _ORDER else 9, kv[0]))


class PyTorchJobController(OwnerController):
    """Kubeflow PyTorchJob (kubeflow.org/v1) once its CRD is installed.

    Pods `<job>-master-0` and `<job>-worker-<i>` (plus a headless Service per pod) carry the
    training-operator labels and env (MASTER_ADDR/PORT, WORLD_SIZE, RANK, PET_* when nprocPerNode
    is set). The job Succeeds when the master (or, without one, every worker) succeeds and Fails when
    a pod fails under restartPolicy Never or restarts exceed backoffLimit. HyperPod's job auto-resume
    (annotations `sagemaker.amazonaws.com/enable-job-auto-resume` / `job-max-retry-count`) restarts
    the whole job instead, when a pod fails or its node goes away.
    """

    primary = PYTORCHJOBS
    owns = {PODS: "PyTorchJob"}

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._live: dict[tuple[str, str], dict[str, str]] = {}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        job = self.sim.get(PYTORCHJOBS, ns, name)
        if job is None:
            self._live.pop((ns, name), None)
            return
        if job["metadata"].get("deletionTimestamp"):
            return
        now = self.sim.now()
        status = copy.deepcopy(job.get("status") or {})
        if not kobj.condition(job, "Created"):
            kobj.set_condition(
                status, "Created", "True", now, "PyTorchJobCreated", f"PyTorchJob {ns}/{name} is created."
            )
        owned = self.sim.owned(PODS, job)
        # Pods in their grace period no longer count; their names stay taken until the kubelet removes them.
        going = {p["metadata"]["name"] for p in owned if p["metadata"].get("deletionTimestamp")}
        pods = {p["metadata"]["name"]: p for p in owned if p["metadata"]["name"] not in going}
        if kobj.is_true(job, "Succeeded") or kobj.is_true(job, "Failed"):
            self._write(job, status, pods)
            return
        live = self._live.setdefault((ns, name), {})
        wanted = self._desired(job, status)
        lost = [n for n, uid in live.items() if n not in pods or pods[n]["metadata"]["uid"] != uid]
        failed = [n for n, p in pods.items() if p.get("status", {}).get("phase") == "Failed"]
        if lost or failed:
            self._failure(job, status, pods, sorted(set(lost) | set(failed)))
            return
        for pod_name, pod in wanted.items():
            if pod_name not in pods and pod_name not in going:
                created = self.sim.create(PODS, pod)
                if created is not None:
                    pods[pod_name] = created
                    self._service(job, created)
            live[pod_name] = pods[pod_name]["metadata"]["uid"]
        restarts = kobj.container_restarts(pods.values())
        backoff = (job.get("spec", {}).get("runPolicy") or {}).get("backoffLimit")
        if backoff is not None and restarts > int(backoff):
            self._finish(
                job,
                status,
                pods,
                False,
                f"PyTorchJob {ns}/{name} has failed because it has reached the specified backoff limit",
            )
            return
        masters = [p for n, p in pods.items() if p["metadata"]["labels"].get(TYPE_LABEL) == "master"]
        deciding = masters or list(pods.values())
        if wanted and deciding and all(p.get("status", {}).get("phase") == "Succeeded" for p in deciding):
            self._finish(job, status, pods, True, f"PyTorchJob {ns}/{name} successfully completed.")
            return
        if (
            wanted
            and all(p.get("status", {}).get("phase") in ("Running", "Succeeded") for p in pods.values())
            and len(pods) >= len(wanted)
        ):
            status.setdefault("startTime", now)
            kobj.set_condition(
                status, "Running", "True", now, "PyTorchJobRunning", f"PyTorchJob {ns}/{name} is running."
            )
        self._write(job, status, pods)

    def _desired(self, job: Obj, status: Obj) -> dict[str, Obj]:
        name = job["metadata"]["name"]
        specs = _replica_specs(job)
        world = sum(int(spec.get("replicas", 1)) for _, spec in specs)
        has_master = any(rtype == "Master" for rtype, _ in specs)
        master = f"{name}-master-0" if has_master else f"{name}-worker-0"
        nproc = (job.get("spec") or {}).get("nprocPerNode")
        attempt = str(int(status.get("restartCount") or 0))
        out: dict[str, Obj] = {}
        for rtype, spec in specs:
            lower = rtype.lower()
            for index in range(int(spec.get("replicas", 1))):
                rank = index if rtype == "Master" or not has_master else index + 1
                pod_name = f"{name}-{lower}-{index}"
                env = {
                    "MASTER_PORT": str(MASTER_PORT),
                    "MASTER_ADDR": master if pod_name != master else "localhost",
                    "WORLD_SIZE": str(world),
                    "RANK": str(rank),
                    "PYTHONUNBUFFERED": "1",
                }
                if nproc is not None:
                    env.update(
                        {
                            "PET_NPROC_PER_NODE": str(nproc),
                            "PET_NNODES": str(world),
                            "PET_NODE_RANK": str(rank),
                            "PET_MASTER_ADDR": env["MASTER_ADDR"],
                            "PET_MASTER_PORT": str(MASTER_PORT),
                        }
                    )
                tmpl = copy.deepcopy(spec.get("template") or {})
                pod_spec = tmpl.setdefault("spec", {})
                pod_spec["restartPolicy"] = (
                    spec.get("restartPolicy", "Never") if spec.get("restartPolicy") != "ExitCode" else "Never"
                )
                for container in pod_spec.get("containers") or []:
                    kept = [e for e in container.get("env") or [] if e.get("name") not in env]
                    container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]
                    if container.get("name") == "pytorch":
                        container.setdefault("ports", [{"name": "pytorchjob-port", "containerPort": MASTER_PORT}])
                labels = {
                    JOB_NAME_LABEL: name,
                    TYPE_LABEL: lower,
                    INDEX_LABEL: str(index),
                    "training.kubeflow.org/operator-name": "pytorchjob-controller",
                }
                if pod_name == master:
                    labels[ROLE_LABEL] = "master"
                out[pod_name] = kobj.pod_from_template(
                    tmpl, job, name=pod_name, labels=labels, annotations={kobj.ATTEMPT: attempt}
                )
        return out

    def _service(self, job: Obj, pod: Obj) -> None:
        md = pod["metadata"]
        if self.sim.get(SERVICES, md["namespace"], md["name"]) is not None:
            return
        selector = {k: md["labels"][k] for k in (JOB_NAME_LABEL, TYPE_LABEL, INDEX_LABEL)}
        self.sim.create(
            SERVICES,
            {
                "metadata": {
                    "name": md["name"],
                    "namespace": md["namespace"],
                    "labels": dict(selector),
                    "ownerReferences": [kobj.owner_ref(job)],
                },
                "spec": {
                    "clusterIP": "None",
                    "selector": selector,
                    "ports": [{"name": "pytorchjob-port", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
                },
            },
        )

    def _failure(self, job: Obj, status: Obj, pods: dict[str, Obj], bad: list[str]) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        annotations = job["metadata"].get("annotations") or {}
        resume = str(annotations.get(AUTO_RESUME, "")).lower() == "true"
        retries = (
            int(str(annotations.get(MAX_RETRY, "0")) or 0) if str(annotations.get(MAX_RETRY, "0")).isdigit() else 0
        )
        count = int(status.get("restartCount") or 0)
        if resume and count < retries:
            now = self.sim.now()
            for pod_name in pods:
                self.sim.delete_pod(ns, pod_name)
            self._live.pop((ns, name), None)
            status["restartCount"] = count + 1
            kobj.set_condition(status, "Running", "False", now, "PyTorchJobRestarting")
            kobj.set_condition(
                status,
                "Restarting",
                "True",
                now,
                "PyTorchJobRestarting",
                f"auto-resume {count + 1}/{retries} after failure of {', '.join(bad)}",
            )
            self.sim.event(
                job,
                "PyTorchJobRestarting",
                f"Job auto-resume: restarting after failure of {', '.join(bad)}",
                "Warning",
                source="job-auto-restart",
            )
            self._write(job, status, {})
            self.sim.enqueue(self, (ns, name))
            return
        self._finish(job, status, pods, False, f"PyTorchJob {ns}/{name} has failed because {', '.join(bad)} failed.")

    def _finish(self, job: Obj, status: Obj, pods: dict[str, Obj], ok: bool, message: str) -> None:
        ns = job["metadata"]["namespace"]
        now = self.sim.now()
        kobj.set_condition(status, "Running", "False", now, "PyTorchJobSucceeded" if ok else "PyTorchJobFailed")
        if kobj.condition({"status": status}, "Restarting"):
            kobj.set_condition(status, "Restarting", "False", now, "PyTorchJobSucceeded" if ok else "PyTorchJobFailed")
        kobj.set_condition(
            status,
            "Succeeded" if ok else "Failed",
            "True",
            now,
            "PyTorchJobSucceeded" if ok else "PyTorchJobFailed",
            message,
        )
        status["completionTime"] = now
        policy = (job.get("spec", {}).get("runPolicy") or {}).get("cleanPodPolicy", "None")
        for pod_name, pod in pods.items():
            if (
                policy == "All"
                or (policy == "Running" and kobj.pod_is_active(pod))
                or (not ok and kobj.pod_is_active(pod))
            ):
                self.sim.delete_pod(ns, pod_name)
        self.sim.event(
            job,
            "PyTorchJobSucceeded" if ok else "PyTorchJobFailed",
            message,
            "Normal" if ok else "Warning",
            source="pytorchjob-controller",
        )
        self._live.pop((ns, job["metadata"]["name"]), None)
        self._write(job, status, pods)

    def _write(self, job: Obj, status: Obj, pods: dict[str, Obj]) -> None:
        replica: dict[str, Obj] = {}
        for rtype, _ in _replica_specs(job):
            mine = [p for p in pods.values() if p["metadata"]["labels"].get(TYPE_LABEL) == rtype.lower()]
            counts = {
                "active": sum(1 for p in mine if kobj.pod_is_active(p)),
                "succeeded": sum(1 for p in mine if p.get("status", {}).get("phase") == "Succeeded"),
                "failed": sum(1 for p in mine if p.get("status", {}).get("phase") == "Failed"),
            }
            replica[rtype] = {k: v for k, v in counts.items() if v} | {
                "selector": f"{JOB_NAME_LABEL}={job['metadata']['name']},{TYPE_LABEL}={rtype.lower()}"
            }
        status["replicaStatuses"] = replica
        self.sim.patch_status(PYTORCHJOBS, job, status)
