"""kube-scheduler's preemption (the DefaultPreemption plugin), for the twin's scheduler: a pending pod that fits
nowhere, whose preemptionPolicy is not Never, looks for a node where removing pods of lower priority would make
it fit (only nodes that failed on resources: no amount of eviction fixes a taint or an affinity). Victims are
the fewest lower-priority pods (all are removed, then the highest-priority ones reprieved while it still fits);
the node with the lowest highest-victim priority, then fewest victims, wins. Victims get the DisruptionTarget
condition, a Preempted event and a graceful delete; the preemptor's status.nominatedNodeName names the node,
and it binds there once the victims are gone (the scheduler holds the room for it meanwhile)."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

from hyperpod_twin.kube import graceful
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kinds import PODS
from hyperpod_twin.sim.kobj import Obj

RESOURCE_REASONS = ("Insufficient ", "Too many pods")

Filter = Callable[[Obj, Obj, dict[str, float], Counter[str], int], list[str]]


def priority(pod: Obj) -> int:
    """The pod's priority (admission sets spec.priority; absent: 0)."""
    return int((pod.get("spec") or {}).get("priority") or 0)


def _fits(check: Filter, pod: Obj, node: Obj, requests: dict[str, float], used: Counter[str], count: int) -> bool:
    return not check(pod, node, requests, used, count)


def victims_on(check: Filter, pod: Obj, node: Obj, requests: dict[str, float], used: Counter[str], count: int,
               running: list[Obj]) -> list[Obj] | None:
    """The lower-priority pods to remove from `node` so `pod` fits, or None when that is not enough (or the node
    fails for a reason eviction cannot fix)."""
    problems = check(pod, node, requests, used, count)
    if any(not p.startswith(RESOURCE_REASONS) for p in problems):
        return None
    mine = priority(pod)
    lower = [p for p in running if priority(p) < mine and not p["metadata"].get("deletionTimestamp")]
    if not lower:
        return None
    free = used.copy()
    for victim in lower:
        free.subtract(kobj.pod_requests(victim))
    remaining = count - len(lower)
    if not _fits(check, pod, node, requests, free, remaining):
        return None
    victims: list[Obj] = []
    # Reprieve the most important pods first (kube keeps as many as still leave room).
    for candidate in sorted(lower, key=lambda p: (-priority(p), p["metadata"].get("creationTimestamp", ""))):
        trial = free.copy()
        trial.update(kobj.pod_requests(candidate))
        if _fits(check, pod, node, requests, trial, remaining + 1):
            free, remaining = trial, remaining + 1
        else:
            victims.append(candidate)
    return victims


def preempt(sim: Any, check: Filter, pod: Obj, nodes: list[Obj], used: dict[str, Counter[str]],
            counts: Counter[str], placed: dict[str, list[Obj]]) -> str | None:
    """Preempt for `pod` if it may and some node would fit it; returns the nominated node's name."""
    spec = pod.get("spec") or {}
    if spec.get("preemptionPolicy") == "Never":
        return None
    nominated = (pod.get("status") or {}).get("nominatedNodeName")
    if nominated and any(p["metadata"].get("deletionTimestamp") for p in placed.get(nominated, [])):
        return str(nominated)  # its victims are still terminating: wait for them, take no more
    requests = kobj.pod_requests(pod)
    best: tuple[tuple[int, int, str], str, list[Obj]] | None = None
    for node in nodes:
        name = node["metadata"]["name"]
        victims = victims_on(check, pod, node, requests, used[name], counts[name], placed.get(name, []))
        if not victims:
            continue
        rank = (max(priority(v) for v in victims), len(victims), name)
        if best is None or rank < best[0]:
            best = (rank, name, victims)
    if best is None:
        return None
    _, node_name, victims = best
    md = pod["metadata"]
    for victim in victims:
        _evict(sim, victim, str(md["uid"]), node_name)
    status = copy.deepcopy(pod.get("status") or {})
    status["nominatedNodeName"] = node_name
    sim.patch_status(PODS, pod, status)
    return node_name


def _evict(sim: Any, victim: Obj, preemptor: str, node: str) -> None:
    """DisruptionTarget condition, the Preempted event, then a graceful delete (its grace period on the twin clock)."""
    current = sim.get(PODS, victim["metadata"]["namespace"], victim["metadata"]["name"])
    if current is None or current["metadata"]["uid"] != victim["metadata"]["uid"]:
        return
    status = copy.deepcopy(current.get("status") or {})
    kobj.set_condition(status, "DisruptionTarget", "True", sim.now(), "PreemptionByScheduler",
                       "default-scheduler: preempting to accommodate a higher priority pod")
    current = sim.patch_status(PODS, current, status)
    message = f"Preempted by pod {preemptor} on node {node}"  # kube-scheduler names the preemptor by uid
    sim.event(current, "Preempted", message, "Normal", source="default-scheduler")
    rtype = sim.rtype(PODS)
    if rtype is not None:
        graceful.delete_pod(sim.store, rtype, copy.deepcopy(current), {}, sim.clock.wall)
