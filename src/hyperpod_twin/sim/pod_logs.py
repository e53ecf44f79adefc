"""What a pod's containers print: the start lines, then the run's lines spread over its run time."""

from __future__ import annotations

import functools
from collections.abc import Callable

from hyperpod_twin.sim import kobj, model_pods, nccl_tests
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.pod_status import should_fail


class PodLogs:
    """Writes a running pod's container output into the cluster's log store, as the kubelet does."""

    def __init__(self, sim: ClusterSim, current: Callable[[str, str, str], Obj | None]) -> None:
        self.sim = sim
        self._current = current  # the pod (ns, name, uid) if it is still that pod

    def write_start(self, pod: Obj) -> None:
        """The container start lines (image and command), then a model server's or NCCL test's own."""
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

    def schedule(self, pod: Obj, run_for: float) -> None:
        """Spread the container's output over its run time, so `logs -f` sees it arrive."""
        ns, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        containers = pod["spec"].get("containers") or []
        if not containers:
            return
        main = containers[0]["name"]
        scripted = kobj.annotation(pod, kobj.LOG_LINES)
        lines = scripted.splitlines() if scripted else (
            nccl_tests.output(self.sim, pod, containers[0]) or default_lines(pod, containers[0]))
        for i, line in enumerate(lines):
            at = run_for * (i + 1) / (len(lines) + 1)
            self.sim.after(at, functools.partial(self._line, ns, name, uid, main, line))

    def _line(self, ns: str, name: str, uid: str, container: str, line: str) -> None:
        pod = self._current(ns, name, uid)
        if pod is not None and pod.get("status", {}).get("phase") == "Running":
            self.sim.runtime.logs.append(ns, name, container, line)


def default_lines(pod: Obj, container: Obj) -> list[str]:
    """Log lines of a container the twin knows nothing special about (training ranks, a failure, plain work)."""
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    if "NNODES" in env:
        rank = env.get("NODE_RANK", env.get("GROUP_RANK", "0"))
        lines = [f"[twin] rank {rank}: world size {env.get('WORLD_SIZE', '?')}, nnodes {env['NNODES']}"]
        lines += [f"step {step}/5 loss={2.5 / step:.3f}" for step in range(1, 6)]
        return [*lines, "training complete"]
    if should_fail(pod):
        return ["[twin] working", "[twin] simulated failure: exiting with code 1"]
    return [f"[twin] working ({i}/3)" for i in range(1, 4)]
