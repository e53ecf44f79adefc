"""Log-pattern hang detection of the training operator: runPolicy.logMonitoringConfiguration, on the twin clock.

A monitor watches the first container of each Running pod. With no match of `logPattern` within
`expectedStartCutOffInSeconds` of the pod running, or no new match within `expectedRecurringFrequencyInSeconds`
of the last one, the pod hangs (the operator then restarts it within the recovery budget). A line matching
`stopPattern` ends the watch. Matches count from when the operator reads them (it re-reads at each deadline).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kobj import Obj


@dataclass
class _Watch:
    since: float  # twin seconds when the monitor first saw the pod Running
    read: int = 0  # log lines read so far
    last_match: float | None = None
    stopped: bool = False


@dataclass(frozen=True)
class Verdict:
    """Pods that hang (with why), and twin seconds until the next deadline (None: nothing to watch)."""

    hanging: dict[str, str]
    next_due: float | None


class LogMonitors:
    """The per-pod watches of every job's log monitors in one twin cluster."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        self._watches: dict[tuple[str, str, str], _Watch] = {}  # (job uid, pod uid, monitor) → watch

    def check(self, job: Obj, pods: dict[str, Obj]) -> Verdict:
        """Read new log lines of the job's Running pods and judge each monitor's deadlines."""
        configs = ((job.get("spec") or {}).get("runPolicy") or {}).get("logMonitoringConfiguration") or []
        job_uid = job["metadata"]["uid"]
        live = {p["metadata"]["uid"] for p in pods.values()}
        for key in [k for k in self._watches if k[0] == job_uid and k[1] not in live]:
            del self._watches[key]
        if not configs:
            return Verdict({}, None)
        now = self.sim.clock.wall()
        hanging: dict[str, str] = {}
        due: float | None = None
        for name, pod in sorted(pods.items()):
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            containers = (pod.get("spec") or {}).get("containers") or []
            if not containers:
                continue
            for config in configs:
                watch = self._watches.setdefault((job_uid, pod["metadata"]["uid"], str(config.get("name"))),
                                                 _Watch(since=now))
                self._read(watch, config, pod["metadata"]["namespace"], name, containers[0]["name"], now)
                left = _time_left(watch, config, now)
                if left is None:
                    continue
                if left <= 0:
                    hanging[name] = _why(watch, config)
                    break
                due = left if due is None else min(due, left)
        return Verdict(hanging, due)

    def _read(self, watch: _Watch, config: Obj, ns: str, pod: str, container: str, now: float) -> None:
        lines = self.sim.runtime.logs.read(ns, pod, container, watch.read)
        watch.read += len(lines)
        stop = config.get("stopPattern")
        for line in lines:
            if watch.stopped:
                return
            if stop and re.search(str(stop), line.text):
                watch.stopped = True
            elif re.search(str(config.get("logPattern", "")), line.text):
                watch.last_match = now


def _time_left(watch: _Watch, config: Obj, now: float) -> float | None:
    if watch.stopped:
        return None
    if watch.last_match is None:
        limit, base = config.get("expectedStartCutOffInSeconds"), watch.since
    else:
        limit, base = config.get("expectedRecurringFrequencyInSeconds"), watch.last_match
    return None if limit is None else base + float(limit) - now


def _why(watch: _Watch, config: Obj) -> str:
    pattern, name = config.get("logPattern"), config.get("name")
    if watch.last_match is None:
        return (f"hang detected by log monitor {name}: no line matched {pattern!r} within "
                f"expectedStartCutOffInSeconds={config.get('expectedStartCutOffInSeconds')}")
    return (f"hang detected by log monitor {name}: no new line matched {pattern!r} within "
            f"expectedRecurringFrequencyInSeconds={config.get('expectedRecurringFrequencyInSeconds')}")
