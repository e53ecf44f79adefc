"""Simulated kubelets: bound pods start, become Ready, write logs, run to completion or crash-loop."""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import threading
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import fsx_mounts, kobj, mlflow_runs, model_pods, nccl_tests
from hyperpod_twin.sim.core import NODES, PODS, ClusterSim, Controller
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.log_shipping import LogShipper
from hyperpod_twin.sim.lustre_network import PENDING, LustreReachability
from hyperpod_twin.sim.nodes import is_ready

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


def runs_to_completion(pod: Obj) -> bool:
    """Pods whose containers are not restarted after a clean exit (Jobs, training replicas)."""
    return pod.get("spec", {}).get("restartPolicy", "Always") in ("Never", "OnFailure")


def should_fail(pod: Obj, restarts: int = 0) -> bool:
    """Whether this attempt's main container exits non-zero (twin annotations on the pod).

    The attempt number is the controller's retry index (annotation) plus in-place container
    restarts, so `fail-attempts` works for restartPolicy OnFailure/Always too.
    """
    if kobj.annotation(pod, kobj.FAIL).lower() in ("true", "1", "yes"):
        return True
    attempts = kobj.annotation(pod, kobj.FAIL_ATTEMPTS)
    if attempts.isdigit():
        attempt = kobj.annotation(pod, kobj.ATTEMPT, "0")
        return (int(attempt) if attempt.isdigit() else 0) + restarts < int(attempts)
    return False


def pod_ip(uid: str) -> str:
    """A stable pod IP in the twin's pod CIDR."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"10.2.{digest[0]}.{max(digest[1], 2)}"


class Kubelet(Controller):
    """Runs every pod bound to a node: Pending → Running → Ready, then Succeeded/Failed for
    run-to-completion pods; on node NotReady their containers die; on node removal the pods go."""

    watches = (PODS, NODES)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._runs: dict[tuple[str, str], _Run] = {}
        self._stopping: dict[tuple[str, str], str] = {}  # pods in their grace period: uid@deadline
        # The pods bound to each node, kept from the pod watch events.
        self._index_lock = threading.Lock()
        self._node_of: dict[tuple[str, str], str] = {}
        self._on_node: dict[str, set[tuple[str, str]]] = {}
        self._lustre = LustreReachability(sim, fsx_mounts.RETRY_SECONDS)  # FSx mounts: the network path
        self._shipper = LogShipper(sim)  # with observability logging on, lines reach CloudWatch before they go

    def stop(self) -> None:
        """Stop the Lustre reachability look-ups and the log shipping."""
        self._lustre.stop()
        self._shipper.stop()

    def _file(self, pod: Obj, deleted: bool, *, only_new: bool = False) -> None:
        """Keep the pods-by-node index (a Node event reads its node's pods, not every pod) current."""
        md = pod["metadata"]
        key = (md.get("namespace", "default"), md["name"])
        node = "" if deleted else str(pod.get("spec", {}).get("nodeName") or "")
        with self._index_lock:
            if only_new and key in self._node_of:
                return
            old = self._node_of.pop(key, "")
            if old:
                held = self._on_node.get(old)
                if held is not None:
                    held.discard(key)
                    if not held:
                        del self._on_node[old]
            if node:
                self._node_of[key] = node
                self._on_node.setdefault(node, set()).add(key)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        md = event.object["metadata"]
        if event.rtype.key == NODES:
            return [("node", md["name"])]
        self._file(event.object, event.type == "DELETED")
        return [("pod", md.get("namespace", "default"), md["name"])]

    def resync_keys(self) -> Iterable[Hashable]:
        pods = self.sim.view(PODS)
        for pod in pods:
            self._file(pod, False, only_new=True)
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
        status["hostIP"] = _internal_ip(node)
        status["containerStatuses"] = [
            {
                **_container_status(c, running_since=None, ready=False, restarts=run.crashes),
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
                "hostIP": _internal_ip(node),
                "podIP": pod_ip(uid),
                "podIPs": [{"ip": pod_ip(uid)}],
                "startTime": status.get("startTime") or now,
                "qosClass": _qos(pod),
            }
        )
        kobj.set_condition(status, "PodReadyToStartContainers", "True", now)
        kobj.set_condition(status, "Initialized", "True", now)
        kobj.set_condition(status, "ContainersReady", "False", now, "ContainersNotReady")
        kobj.set_condition(status, "Ready", "False", now, "ContainersNotReady")
        kobj.set_condition(status, "PodScheduled", "True", now)
        status["containerStatuses"] = [
            _container_status(c, running_since=now, ready=False, restarts=run.crashes)
            for c in pod["spec"].get("containers") or []
        ]
        if pod["spec"].get("initContainers"):
            status["initContainerStatuses"] = [
                {
                    **_container_status(c, running_since=None, ready=True, restarts=0),
                    "state": {
                        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
                    },
                }
                for c in pod["spec"]["initContainers"]
            ]
        self.sim.patch_status(PODS, pod, status)
        self._write_start_logs(pod)
        mlflow_runs.start(self.sim, pod)
        ready_delay = self.sim.config.pod_ready_seconds
        self.sim.after(ready_delay, lambda: self._ready(ns, name, uid))
        if runs_to_completion(pod) or should_fail(pod, run.crashes):
            run_for = kobj.float_annotation(pod, kobj.RUN_SECONDS, self.sim.config.job_run_seconds)
            self._schedule_log_lines(pod, run_for)
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
                **_container_status(c, running_since=None, ready=False, restarts=run.crashes),
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
        with self._index_lock:
            keys = sorted(self._on_node.get(node_name, ()))
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

    # -- logs ----------------------------------------------------------------------------------------
    def _write_start_logs(self, pod: Obj) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        for container in pod["spec"].get("containers") or []:
            command = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
            self.sim.runtime.logs.append(
                ns, name, container["name"], f"[twin] started {container.get('image', '')} {command}".rstrip()
            )
            # NCCL's network lines come at communicator init, right after start (sim/nccl_tests.py).
            for line in [*model_pods.startup_lines(pod, container),
                         *nccl_tests.training_lines(self.sim, pod, container)]:
                self.sim.runtime.logs.append(ns, name, container["name"], line)

    def _schedule_log_lines(self, pod: Obj, run_for: float) -> None:
        """Spread the container's output over its run time, so `logs -f` sees it arrive."""
        ns, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        containers = pod["spec"].get("containers") or []
        if not containers:
            return
        main = containers[0]["name"]
        scripted = kobj.annotation(pod, kobj.LOG_LINES)
        lines = scripted.splitlines() if scripted else (
            nccl_tests.output(self.sim, pod, containers[0]) or _default_lines(pod, containers[0]))
        for i, line in enumerate(lines):
            at = run_for * (i + 1) / (len(lines) + 1)
            self.sim.after(at, functools.partial(self._log, ns, name, uid, main, line))

    def _log(self, ns: str, name: str, uid: str, container: str, line: str) -> None:
        pod = self._current(ns, name, uid)
        if pod is not None and pod.get("status", {}).get("phase") == "Running":
            self.sim.runtime.logs.append(ns, name, container, line)

    def _forget(self, ns: str, name: str) -> None:
        self._runs.pop((ns, name), None)
        self._stopping.pop((ns, name), None)
        self.sim.runtime.pod_http.unregister_pod(ns, name)
        self._shipper.ship(ns, name)
        self.sim.runtime.logs.forget(ns, name)


def _default_lines(pod: Obj, container: Obj) -> list[str]:
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    if "NNODES" in env:
        rank = env.get("NODE_RANK", env.get("GROUP_RANK", "0"))
        lines = [f"[twin] rank {rank}: world size {env.get('WORLD_SIZE', '?')}, nnodes {env['NNODES']}"]
        lines += [f"step {step}/5 loss={2.5 / step:.3f}" for step in range(1, 6)]
        return [*lines, "training complete"]
    if should_fail(pod):
        return ["[twin] working", "[twin] simulated failure: exiting with code 1"]
    return [f"[twin] working ({i}/3)" for i in range(1, 4)]


def _container_status(container: Obj, *, running_since: str | None, ready: bool, restarts: int) -> Obj:
    image = str(container.get("image", ""))
    status: Obj = {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": f"containerd://{hashlib.sha256(container['name'].encode()).hexdigest()[:32]}",
        "ready": ready,
        "started": running_since is not None,
        "restartCount": restarts,
    }
    if running_since is not None:
        status["state"] = {"running": {"startedAt": running_since}}
    return status


def _internal_ip(node: Obj) -> str:
    for address in node.get("status", {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


def _qos(pod: Obj) -> str:
    containers = pod.get("spec", {}).get("containers") or []
    if not any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits") for c in containers
    ):
        return "BestEffort"
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if not {"cpu", "memory"} <= set(limits) or any(
            str(requests.get(k, limits[k])) != str(limits[k]) for k in limits
        ):
            return "Burstable"
    return "Guaranteed"
