"""KubeRay: RayCluster → head pod + Service and worker pods; RayJob → cluster, submitter Job, job status."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller, OwnerController
from hyperpod_twin.sim.jobs import job_finished
from hyperpod_twin.sim.kinds import JOBS, PODS, SERVICES, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

RAYCLUSTERS: TypeKey = ("ray.io", "rayclusters")
RAYJOBS: TypeKey = ("ray.io", "rayjobs")
CLUSTER_LABEL = "ray.io/cluster"
TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
ORIGIN_LABEL = "ray.io/originated-from-crd"
PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080, "serve": 8000}


def head_service_name(cluster: str) -> str:
    """KubeRay's head Service name."""
    return f"{cluster}-head-svc"


def _ray_pod(cluster: Obj, template: Obj, node_type: str, group: str, head_svc: str) -> Obj:
    name = cluster["metadata"]["name"]
    tmpl = copy.deepcopy(template)
    spec = tmpl.setdefault("spec", {})
    address = f"{head_svc}.{cluster['metadata']['namespace']}.svc.cluster.local:{PORTS['gcs-server']}"
    for container in spec.get("containers") or []:
        env = [e for e in container.get("env") or [] if e.get("name") not in ("RAY_CLUSTER_NAME", "RAY_ADDRESS")]
        env.append({"name": "RAY_CLUSTER_NAME", "value": name})
        if node_type == "worker":
            env.append({"name": "RAY_ADDRESS", "value": address})
        container["env"] = env
    labels = {
        CLUSTER_LABEL: name,
        TYPE_LABEL: node_type,
        GROUP_LABEL: group,
        ORIGIN_LABEL: "RayCluster",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    pod = kobj.pod_from_template(tmpl, cluster, labels=labels)
    prefix = f"{name}-head-" if node_type == "head" else f"{name}-{group}-worker-"
    pod["metadata"]["generateName"] = prefix
    return pod


class RayClusterController(OwnerController):
    """One head pod and Service `<name>-head-svc`, worker pods per group within [min, max] (times
    numOfHosts); status state `ready` once every pod is Ready, with endpoints and head addresses."""

    primary = RAYCLUSTERS
    owns = {PODS: "RayCluster"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        rc = self.sim.get(RAYCLUSTERS, ns, name)
        if rc is None or rc["metadata"].get("deletionTimestamp"):
            return
        spec = rc.get("spec") or {}
        suspended = bool(spec.get("suspend"))
        pods = [p for p in self.sim.owned(PODS, rc)]
        for pod in pods:
            if pod.get("status", {}).get("phase") in ("Failed", "Succeeded") or suspended:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
        pods = [p for p in pods if kobj.pod_is_active(p) and not suspended]
        head_svc = head_service_name(name)
        head_spec = spec.get("headGroupSpec") or {}
        heads = [p for p in pods if p["metadata"]["labels"].get(TYPE_LABEL) == "head"]
        if not suspended and not heads:
            created = self.sim.create(
                PODS, _ray_pod(rc, head_spec.get("template") or {}, "head", "headgroup", head_svc)
            )
            if created is not None:
                heads.append(created)
        self._service(rc, head_spec)
        desired_workers = 0
        available = 0
        worker_pods: list[Obj] = []
        for group in spec.get("workerGroupSpecs") or []:
            gname = group.get("groupName", "workers")
            replicas = int(group.get("replicas", 0) or 0)
            replicas = max(replicas, int(group.get("minReplicas", 0) or 0))
            if group.get("maxReplicas") is not None:
                replicas = min(replicas, int(group["maxReplicas"]))
            if group.get("suspend"):
                replicas = 0
            want = replicas * int(group.get("numOfHosts", 1) or 1)
            doomed = set((group.get("scaleStrategy") or {}).get("workersToDelete") or [])
            mine = [
                p
                for p in pods
                if p["metadata"]["labels"].get(GROUP_LABEL) == gname
                and p["metadata"]["labels"].get(TYPE_LABEL) == "worker"
            ]
            for pod in list(mine):
                if pod["metadata"]["name"] in doomed:
                    self.sim.delete_pod(ns, pod["metadata"]["name"])
                    mine.remove(pod)
            for pod in mine[want:] if len(mine) > want else []:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            mine = mine[:want]
            while not suspended and len(mine) < want:
                created = self.sim.create(PODS, _ray_pod(rc, group.get("template") or {}, "worker", gname, head_svc))
                if created is None:
                    break
                mine.append(created)
            desired_workers += want
            available += sum(1 for p in mine if kobj.pod_is_ready(p))
            worker_pods += mine
        self._status(rc, heads, worker_pods, desired_workers, available, suspended)

    def _service(self, rc: Obj, head_spec: Obj) -> None:
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        svc_name = head_service_name(name)
        if self.sim.get(SERVICES, ns, svc_name) is not None:
            return
        ports = [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in PORTS.items()]
        self.sim.create(
            SERVICES,
            {
                "metadata": {
                    "name": svc_name,
                    "namespace": ns,
                    "labels": {CLUSTER_LABEL: name, TYPE_LABEL: "head"},
                    "annotations": dict(rc["spec"].get("headServiceAnnotations") or {}),
                    "ownerReferences": [kobj.owner_ref(rc)],
                },
                "spec": {
                    "type": head_spec.get("serviceType", "ClusterIP"),
                    "selector": {CLUSTER_LABEL: name, TYPE_LABEL: "head"},
                    "ports": ports,
                },
            },
        )

    def _status(
        self, rc: Obj, heads: list[Obj], workers: list[Obj], desired: int, available: int, suspended: bool
    ) -> None:
        now = self.sim.now()
        status = copy.deepcopy(rc.get("status") or {})
        head_ready = any(kobj.pod_is_ready(p) for p in heads)
        ready = head_ready and available >= desired
        state = "suspended" if suspended else ("ready" if ready else status.get("state", ""))
        gpu = cpu = mem = 0.0
        for pod in [*heads, *workers]:
            req = kobj.pod_requests(pod)
            gpu += req.get("nvidia.com/gpu", 0.0)
            cpu += req.get("cpu", 0.0)
            mem += req.get("memory", 0.0)
        groups = rc.get("spec", {}).get("workerGroupSpecs") or []
        status.update(
            {
                "state": state,
                "desiredWorkerReplicas": desired,
                "availableWorkerReplicas": available,
                "readyWorkerReplicas": available,
                "minWorkerReplicas": sum(int(g.get("minReplicas", 0) or 0) for g in groups),
                "maxWorkerReplicas": sum(int(g.get("maxReplicas", 0) or 0) for g in groups),
                "desiredCPU": kobj.format_quantity("cpu", cpu),
                "desiredMemory": kobj.format_quantity("memory", mem),
                "desiredGPU": str(int(gpu)),
                "desiredTPU": "0",
                "endpoints": {k: str(v) for k, v in PORTS.items()},
                "observedGeneration": rc["metadata"].get("generation", 1),
            }
        )
        if heads:
            head = heads[0]
            status["head"] = {
                "podName": head["metadata"]["name"],
                "podIP": head.get("status", {}).get("podIP", ""),
                "serviceName": head_service_name(rc["metadata"]["name"]),
            }
        transitions = dict(status.get("stateTransitionTimes") or {})
        if state and state not in transitions:
            transitions[state] = now
            status["stateTransitionTimes"] = transitions
        kobj.set_condition(
            status,
            "HeadPodReady",
            "True" if head_ready else "False",
            now,
            "HeadPodRunningAndReady" if head_ready else "HeadPodNotFound",
        )
        kobj.set_condition(
            status,
            "RayClusterProvisioned",
            "True" if ready else "False",
            now,
            "AllPodRunningAndReadyFirstTime" if ready else "RayClusterPodsProvisioning",
        )
        self.sim.patch_status(RAYCLUSTERS, rc, status)


class RayJobController(Controller):
    """A RayJob gets its own RayCluster (or uses one picked by clusterSelector), then a submitter
    Job (K8sJobMode) whose result becomes jobStatus SUCCEEDED/FAILED and jobDeploymentStatus
    Complete/Failed; shutdownAfterJobFinishes deletes the cluster after ttlSecondsAfterFinished."""

    watches = (RAYJOBS, RAYCLUSTERS, JOBS)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key in (RAYCLUSTERS, JOBS):
            ref = kobj.controller_of(event.object)
            if ref and ref.get("kind") == "RayJob":
                return [(event.object["metadata"].get("namespace", "default"), ref["name"])]
            if event.rtype.key == RAYCLUSTERS:
                ns = event.object["metadata"].get("namespace", "default")
                return [
                    (ns, j["metadata"]["name"])
                    for j in self.sim.list(RAYJOBS, ns)
                    if (j.get("spec") or {}).get("clusterSelector")
                ]
            return []
        return super().keys_for(event)

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.sim.list(RAYJOBS)]

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        rj = self.sim.get(RAYJOBS, ns, name)
        if rj is None or rj["metadata"].get("deletionTimestamp"):
            return
        spec = rj.get("spec") or {}
        status = copy.deepcopy(rj.get("status") or {})
        now = self.sim.now()
        if status.get("jobDeploymentStatus") in ("Complete", "Failed"):
            return
        if spec.get("suspend"):
            status.update({"jobDeploymentStatus": "Suspended"})
            self.sim.patch_status(RAYJOBS, rj, status)
            return
        status.setdefault("jobId", f"{name}-{kobj.random_suffix(8)}")
        status.setdefault("startTime", now)
        cluster = self._cluster(rj, status)
        if cluster is None:
            status.update({"jobDeploymentStatus": "Initializing", "jobStatus": status.get("jobStatus", "")})
            self.sim.patch_status(RAYJOBS, rj, status)
            return
        cname = cluster["metadata"]["name"]
        status["rayClusterName"] = cname
        status["dashboardURL"] = f"{head_service_name(cname)}.{ns}.svc.cluster.local:{PORTS['dashboard']}"
        status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
        if (cluster.get("status") or {}).get("state") != "ready":
            status["jobDeploymentStatus"] = "Initializing"
            self.sim.patch_status(RAYJOBS, rj, status)
            return
        job = self._submitter(rj, status, cname)
        result = job_finished(job) if job else None
        if result is None:
            status.update({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
            self.sim.patch_status(RAYJOBS, rj, status)
            return
        ok = result == "Complete"
        status.update(
            {
                "jobDeploymentStatus": "Complete" if ok else "Failed",
                "jobStatus": "SUCCEEDED" if ok else "FAILED",
                "endTime": now,
                "succeeded": 1 if ok else 0,
                "failed": 0 if ok else 1,
            }
        )
        if not ok:
            status["reason"] = "AppFailed"
            status["message"] = "the Ray job's entrypoint exited with a non-zero code"
        else:
            status["message"] = "Job finished successfully."
        self.sim.patch_status(RAYJOBS, rj, status)
        self.sim.event(
            rj,
            "Completed" if ok else "Failed",
            f"RayJob {name} {status['jobStatus']}",
            "Normal" if ok else "Warning",
            source="ray-job-controller",
        )
        if spec.get("shutdownAfterJobFinishes") and kobj.is_owned_by(cluster, rj):
            ttl = float(spec.get("ttlSecondsAfterFinished", 0) or 0)

            def shutdown() -> None:
                self.sim.delete(RAYCLUSTERS, ns, cname)

            self.sim.after(ttl, shutdown)

    def _cluster(self, rj: Obj, status: Obj) -> Obj | None:
        ns = rj["metadata"]["namespace"]
        spec = rj.get("spec") or {}
        selector = spec.get("clusterSelector")
        if selector:
            for rc in self.sim.list(RAYCLUSTERS, ns):
                if kobj.match_map(selector, rc["metadata"].get("labels")) or rc["metadata"]["name"] == selector.get(
                    CLUSTER_LABEL
                ):
                    return rc
            return None
        owned = self.sim.owned(RAYCLUSTERS, rj)
        if owned:
            return owned[0]
        if not spec.get("rayClusterSpec"):
            return None
        body = {
            "metadata": {
                "generateName": f"{rj['metadata']['name']}-",
                "namespace": ns,
                "labels": {ORIGIN_LABEL: "RayJob", "ray.io/originated-from-cr-name": rj["metadata"]["name"]},
                "ownerReferences": [kobj.owner_ref(rj)],
            },
            "spec": copy.deepcopy(spec["rayClusterSpec"]),
        }
        return self.sim.create(RAYCLUSTERS, body)

    def _submitter(self, rj: Obj, status: Obj, cluster_name: str) -> Obj | None:
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        existing = [j for j in self.sim.owned(JOBS, rj)]
        if existing:
            return existing[0]
        spec = rj.get("spec") or {}
        template = copy.deepcopy(spec.get("submitterPodTemplate") or {})
        if not (template.get("spec") or {}).get("containers"):
            head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
            image = ((head.get("spec") or {}).get("containers") or [{}])[0].get("image", "rayproject/ray:2.46.0")
            template.setdefault("spec", {})["containers"] = [
                {
                    "name": "ray-job-submitter",
                    "image": image,
                    "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                }
            ]
        address = f"http://{head_service_name(cluster_name)}.{ns}.svc.cluster.local:{PORTS['dashboard']}"
        entry = str(spec.get("entrypoint", ""))
        container = template["spec"]["containers"][0]
        container.setdefault(
            "command",
            ["ray", "job", "submit", "--address", address, "--submission-id", status["jobId"], "--", *entry.split()],
        )
        template["spec"]["restartPolicy"] = "Never"
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        for key, value in (rj["metadata"].get("annotations") or {}).items():
            if key.startswith("twin.instantstart.io/"):
                annotations.setdefault(key, value)
        annotations.setdefault(
            kobj.LOG_LINES,
            "\n".join(
                [
                    f"Job submission server address: {address}",
                    f"Job '{status['jobId']}' submitted successfully",
                    f"Tailing logs until the job exits (entrypoint: {entry})",
                ]
            ),
        )
        body = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {ORIGIN_LABEL: "RayJob"},
                "ownerReferences": [kobj.owner_ref(rj)],
            },
            "spec": {
                "backoffLimit": int((spec.get("submitterConfig") or {}).get("backoffLimit", 2)),
                "template": template,
            },
        }
        return self.sim.create(JOBS, body)
