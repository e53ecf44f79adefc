"""Simulated kubelets: bound pods start, become Ready, write logs, run to completion or crash-loop."""

from __future__ import annotations

import copy
import logging
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import fsx_mounts, kobj, mlflow_runs, model_pods
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES, PODS
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.log_shipping import LogShipper
from hyperpod_twin.sim.lustre_network import PENDING, LustreReachability
from hyperpod_twin.sim.nodes import is_ready
from hyperpod_twin.sim.pod_index import PodsByNode
from hyperpod_twin.sim.pod_logs import PodLogs
from hyperpod_twin.sim.pod_status import (
    container_status,
    internal_ip,
    pod_ip,
    qos_class,
    runs_to_completion,
    should_fail,
)

log = logging.getLogger(__name__)

_MAX_BACKOFF = 300.0
PENDING_RETRY_SECONDS = 1.0  # an FSx mount whose network path is still being looked up: look again soon


@dataclass
class _Run:
    """What the kubelet remembers of one pod (by uid)."""

    uid: str
    starting: bool = False
    down: bool = False  # its node went NotReady while it ran
    crashes: int = 0
    mount_problem: str | None = None  # the last FailedMount message (its volumes could not be mounted)


class Kubelet(Controller):
    """Runs every pod bound to a node: Pending → Running → Ready, then Succeeded/Failed for
    run-to-completion pods; on node NotReady their containers die; on node removal the pods go."""

    watches = (PODS, NODES)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._runs: dict[tuple[str, str], _Run] = {}
        self._stopping: dict[tuple[str, str], str] = {}  # pods in their grace period: uid@deadline
        self._index = PodsByNode()  # the pods bound to each node, kept from the pod watch events
        self._lustre = LustreReachability(sim, fsx_mounts.RETRY_SECONDS)  # FSx mounts: the network path
        self._logs = PodLogs(sim, self._current)
        self._shipper = LogShipper(sim)  # with observability logging on, lines reach CloudWatch before they go

    def stop(self) -> None:
        """Stop the Lustre reachability look-ups and the log shipping."""
        self._lustre.stop()
        self._shipper.stop()

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        md = event.object["metadata"]
        if event.rtype.key == NODES:
            return [("node", md["name"])]
        self._index.file(event.object, event.type == "DELETED")
        return [("pod", md.get("namespace", "default"), md["name"])]

    def resync_keys(self) -> Iterable[Hashable]:
        pods = self.sim.view(PODS)
        for pod in pods:
            self._index.file(pod, False, only_new=True)
        return [("pod", p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "node":
            self._node(str(key[1]))
        else:
            self._pod(str(key[1]), str(key[2]))

    # -- pods ----------------------------------------------------------------------------------------
    def _pod(self, ns: str, name: str) -> None:
        pod = self.sim.get(PODS, ns, name)
        run = self._runs.get((ns, name))
        if pod is None or (run is not None and run.uid != pod["metadata"]["uid"]):
            self._forget(ns, name)
            run = None
        if pod is None:
            return
        md = pod["metadata"]
        if md.get("deletionTimestamp"):
            self._terminating(pod)
            return
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name or kobj.pod_is_terminal(pod):
            return
        node = self.sim.get(NODES, "", node_name)
        if node is None:
            self._forget(ns, name)
            self.sim.delete(PODS, ns, name)
            return
        if run is None:
            run = self._runs[(ns, name)] = _Run(md["uid"])
        phase = pod.get("status", {}).get("phase", "Pending")
        if phase == "Pending" and not run.starting and is_ready(node):
            problem = fsx_mounts.mount_problem(self.sim, pod, node, self._lustre)
            if problem is PENDING:  # the node plugin is still trying: no event yet
                self.sim.requeue(self, ("pod", ns, name), PENDING_RETRY_SECONDS)
                return
            if problem is not None:
                if problem != run.mount_problem:
                    run.mount_problem = problem
                    self._creating(pod, run, node)
                self.sim.event(pod, "FailedMount", problem, "Warning", source="kubelet")
                self.sim.requeue(self, ("pod", ns, name), fsx_mounts.RETRY_SECONDS)
                return
            run.starting = True
            self._creating(pod, run, node)
            delay = kobj.float_annotation(pod, kobj.START_SECONDS, self.sim.config.pod_start_seconds)
            self.sim.after(delay, lambda: self._start(ns, name, run.uid))

    def _terminating(self, pod: Obj) -> None:
        """A deleted pod: its containers get SIGTERM and are killed when the grace period ends (on the
        twin clock); then the kubelet's final delete (period 0) removes it, unless finalizers hold it."""
        md = pod["metadata"]
        ns, name = md["namespace"], md["name"]
        node_name = pod.get("spec", {}).get("nodeName")
        if int(md.get("deletionGracePeriodSeconds") or 0) > 0 and node_name and self.sim.get(NODES, "", node_name):
            remaining = (kobj.parse_time(md["deletionTimestamp"]) or 0.0) - self.sim.clock.wall()
            if remaining > 0:
                mark = f"{md['uid']}@{md['deletionTimestamp']}"
                if self._stopping.get((ns, name)) != mark:
                    self._stopping[(ns, name)] = mark
                    for container in pod["spec"].get("containers") or []:
                        self.sim.runtime.logs.append(
                            ns, name, container["name"],
                            f"[twin] SIGTERM: stopping within {md['deletionGracePeriodSeconds']} s (grace period)")
                    self.sim.after(remaining, lambda: self.sim.enqueue(self, ("pod", ns, name)))
                return
        if md.get("finalizers"):
            return
        self._forget(ns, name)
        self.sim.delete(PODS, ns, name)

    def _creating(self, pod: Obj, run: _Run, node: Obj) -> None:
        """Bound but not started: containers wait in ContainerCreating (what `kubectl get pods` shows)."""
        status = dict(pod.get("status") or {})
        status["hostIP"] = internal_ip(node)
        status["containerStatuses"] = [
            {
                **container_status(c, running_since=None, ready=False, restarts=run.crashes),
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in pod["spec"].get("containers") or []
        ]
        self.sim.patch_status(PODS, pod, status)

    def _current(self, ns: str, name: str, uid: str) -> Obj | None:
        pod = self.sim.get(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod

    def _start(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        run = self._runs.get((ns, name))
        if pod is None or run is None or pod.get("status", {}).get("phase", "Pending") != "Pending":
            return
        node = self.sim.get(NODES, "", pod["spec"].get("nodeName", ""))
        if node is None or not is_ready(node):
            run.starting = False  # retried when the node is Ready again
            return
        now = self.sim.now()
        status = dict(pod.get("status") or {})
        status.update(
            {
                "phase": "Running",
                "hostIP": internal_ip(node),
                "podIP": pod_ip(uid),
                "podIPs": [{"ip": pod_ip(uid)}],
                "startTime": status.get("startTime") or now,
                "qosClass": qos_class(pod),
            }
        )
        kobj.set_condition(status, "PodReadyToStartContainers", "True", now)
        kobj.set_condition(status, "Initialized", "True", now)
        kobj.set_condition(status, "ContainersReady", "False", now, "ContainersNotReady")
        kobj.set_condition(status, "Ready", "False", now, "ContainersNotReady")
        kobj.set_condition(status, "PodScheduled", "True", now)
        status["containerStatuses"] = [
            container_status(c, running_since=now, ready=False, restarts=run.crashes)
            for c in pod["spec"].get("containers") or []
        ]
        if pod["spec"].get("initContainers"):
            status["initContainerStatuses"] = [
                {
                    **container_status(c, running_since=None, ready=True, restarts=0),
                    "state": {
                        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
                    },
                }
                for c in pod["spec"]["initContainers"]
            ]
        self.sim.patch_status(PODS, pod, status)
        self._logs.write_start(pod)
        mlflow_runs.start(self.sim, pod)
        ready_delay = self.sim.config.pod_ready_seconds
        self.sim.after(ready_delay, lambda: self._ready(ns, name, uid))
        if runs_to_completion(pod) or should_fail(pod, run.crashes):
            run_for = kobj.float_annotation(pod, kobj.RUN_SECONDS, self.sim.config.job_run_seconds)
            self._logs.schedule(pod, run_for)
            self.sim.after(max(run_for, ready_delay + 0.01), lambda: self._exit(ns, name, uid))

    def _ready(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        run = self._runs.get((ns, name))
        if pod is None or run is None or run.down or pod.get("status", {}).get("phase") != "Running":
            return
        problem = model_pods.local_model_problem(self.sim, pod)
        if problem is not None:  # the server exits at startup: it has no model to load
            for container in pod["spec"].get("containers") or []:
                self.sim.runtime.logs.append(ns, name, container["name"], problem)
            self._crash(pod, run)
            return
        now = self.sim.now()
        status = dict(pod["status"])
        kobj.set_condition(status, "ContainersReady", "True", now)
        kobj.set_condition(status, "Ready", "True", now)
        status["containerStatuses"] = [
            dict(cs, ready=True, started=True) for cs in status.get("containerStatuses") or []
        ]
        stored = self.sim.patch_status(PODS, pod, status)
        model_pods.register(self.sim, stored)

    def _exit(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        run = self._runs.get((ns, name))
        if pod is None or run is None or pod.get("status", {}).get("phase") != "Running" or run.down:
            return
        failed = should_fail(pod, run.crashes)
        if runs_to_completion(pod) and not (failed and pod["spec"].get("restartPolicy") == "OnFailure"):
            self._terminate(pod, 1 if failed else 0, "Error" if failed else "Completed")
        else:
            self._crash(pod, run)

    def _terminate(self, pod: Obj, exit_code: int, reason: str, message: str = "") -> None:
        """Containers exited: the pod ends Succeeded (all 0) or Failed."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        now = self.sim.now()
        for container in pod["spec"].get("containers") or []:
            if message:
                self.sim.runtime.logs.append(ns, name, container["name"], message)
            self.sim.runtime.logs.append(ns, name, container["name"], f"[twin] exited with code {exit_code}")
            self.sim.runtime.logs.close(ns, name, container["name"])
        self.sim.runtime.pod_http.unregister_pod(ns, name)
        status = dict(pod.get("status") or {})
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        if message:
            status["message"] = message
        kobj.set_condition(status, "Ready", "False", now, "PodCompleted" if exit_code == 0 else "PodFailed")
        kobj.set_condition(status, "ContainersReady", "False", now, "PodCompleted" if exit_code == 0 else "PodFailed")
        started = status.get("startTime") or now
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "startedAt": started,
                        "finishedAt": now,
                        **({"message": message} if message else {}),
                    }
                },
            }
            for c in pod["spec"].get("containers") or []
        ]
        self.sim.patch_status(PODS, pod, status)

    def _crash(self, pod: Obj, run: _Run) -> None:
        """A restartPolicy=Always container exited non-zero: CrashLoopBackOff, restarted after backoff."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        run.crashes += 1
        now = self.sim.now()
        self.sim.runtime.pod_http.unregister_pod(ns, name)
        status = dict(pod["status"])
        kobj.set_condition(status, "ContainersReady", "False", now, "ContainersNotReady")
        kobj.set_condition(status, "Ready", "False", now, "ContainersNotReady")
        status["containerStatuses"] = [
            {
                **container_status(c, running_since=None, ready=False, restarts=run.crashes),
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting failed container"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now}},
            }
            for c in pod["spec"].get("containers") or []
        ]
        self.sim.patch_status(PODS, pod, status)
        self.sim.event(pod, "BackOff", "Back-off restarting failed container", "Warning", source="kubelet")
        backoff = min(10.0 * 2 ** (run.crashes - 1), _MAX_BACKOFF)
        uid = run.uid
        self.sim.after(backoff, lambda: self._restart(ns, name, uid))

    def _restart(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid)
        run = self._runs.get((ns, name))
        if pod is None or run is None:
            return
        status = dict(pod["status"])
        status["phase"] = "Pending"
        pod = self.sim.patch_status(PODS, pod, status)
        run.starting = False
        run.down = False
        self._start_now(pod)

    def _start_now(self, pod: Obj) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        run = self._runs[(ns, name)]
        run.starting = True
        self._start(ns, name, run.uid)

    # -- nodes ---------------------------------------------------------------------------------------
    def _node(self, node_name: str) -> None:
        node = self.sim.get(NODES, "", node_name)
        keys = self._index.on(node_name)
        found = (self.sim.peek(PODS, ns, name) for ns, name in keys)
        pods = [copy.deepcopy(p) for p in found if p is not None and p.get("spec", {}).get("nodeName") == node_name]
        if node is None:
            for pod in pods:  # pod GC: pods of a vanished node are deleted; their controllers replace them
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                self._forget(ns, name)
                self.sim.delete(PODS, ns, name)
            return
        ready = is_ready(node)
        for pod in pods:
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            if self._evicted(pod, node):
                continue
            run = self._runs.get((ns, name))
            phase = pod.get("status", {}).get("phase", "Pending")
            if not ready and phase == "Running":
                self._node_down(pod, run)
            elif ready and run is not None and run.down:
                run.down = False
                run.crashes += 1
                status = dict(pod["status"], phase="Pending")
                pod = self.sim.patch_status(PODS, pod, status)
                self._start_now(pod)
            elif ready:
                self.sim.enqueue(self, ("pod", ns, name))

    def _node_down(self, pod: Obj, run: _Run | None) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.sim.runtime.pod_http.unregister_pod(ns, name)
        if runs_to_completion(pod):
            self._terminate(pod, 137, "Error", "[twin] node stopped (reboot or failure) while the container ran")
            return
        if run is not None:
            run.down = True
        now = self.sim.now()
        status = dict(pod["status"])
        kobj.set_condition(status, "Ready", "False", now, "NodeNotReady")
        kobj.set_condition(status, "ContainersReady", "False", now, "NodeNotReady")
        status["containerStatuses"] = [dict(cs, ready=False) for cs in status.get("containerStatuses") or []]
        self.sim.patch_status(PODS, pod, status)

    def _evicted(self, pod: Obj, node: Obj) -> bool:
        """NoExecute taints evict pods that do not tolerate them."""
        tolerations = pod.get("spec", {}).get("tolerations") or []
        for taint in node.get("spec", {}).get("taints") or []:
            if taint.get("effect") == "NoExecute" and not kobj.tolerates(tolerations, taint):
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                self.sim.event(
                    pod,
                    "TaintManagerEviction",
                    f"Marking for deletion Pod {ns}/{name}",
                    source="taint-eviction-controller",
                )
                self.sim.delete_pod(ns, name)  # the taint manager deletes through the API, with grace
                return True
        return False

    def _forget(self, ns: str, name: str) -> None:
        self._runs.pop((ns, name), None)
        self._stopping.pop((ns, name), None)
        self.sim.runtime.pod_http.unregister_pod(ns, name)
        self._shipper.ship(ns, name)
        self.sim.runtime.logs.forget(ns, name)
