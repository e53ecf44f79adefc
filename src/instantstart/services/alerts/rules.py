"""The alert rules: each a pure condition over one cluster's snapshot (timeline, watched pods and watches, lifecycle
scripts, GPU utilisation, Kueue Workloads), with a default threshold and hold time the operator can change
(alert_rules_update)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

Obj = dict[str, Any]
DAY = timedelta(days=1)
XID = re.compile(r"\bXid[ :]*(\d{1,3})\b", re.IGNORECASE)
REPLACING = re.compile(r"^Replacing (\S+) with (\S+)")
CAPACITY = re.compile(r"^InsufficientCapacity\b")
LAUNCHING = re.compile(r"^Launching instance (\S+)")


@dataclass
class Snapshot:
    """What the rules read of one cluster at one evaluation (gathered by the evaluator, outside any DB session)."""

    cluster_tag: str
    now: datetime
    hyperpod: list[Obj] = field(default_factory=list)  # timeline entries of source hyperpod, last 24 h, oldest first
    pods: list[Obj] = field(default_factory=list)  # pod projections of the watched state
    restarted: set[str] = field(default_factory=set)  # pods (ns/name) whose restarts rose since the last evaluation
    watches: list[Obj] = field(default_factory=list)  # WatchHealth.as_dict() of each running watch
    lifecycle: list[str] = field(default_factory=list)  # lifecycle_problems sentences
    gpu_idle: dict[str, float] | None = None  # node → mean utilisation % now (allocated nodes only)
    workloads: list[Obj] = field(default_factory=list)  # Kueue Workloads of every namespace (task governance)
    unknown: set[str] = field(default_factory=set)  # rules whose sources could not be read now: their alerts stay


@dataclass(frozen=True)
class Threshold:
    """A rule's setting: `value` (count or percent, None when the rule has none) and `minutes` the condition must
    hold before the alert opens (0: at once); `enabled` false silences the rule."""

    value: float | None
    minutes: int
    enabled: bool = True


Condition = Callable[[Snapshot, Threshold], dict[str, str]]  # → {subject: message} of what holds now


@dataclass(frozen=True)
class Rule:
    """One rule: its name, what it watches (agents and the UI read this), its default, its condition."""

    name: str
    description: str
    default: Threshold
    unit: str
    condition: Condition


def _recent(snap: Snapshot) -> list[Obj]:
    return [e for e in snap.hyperpod if e["last_at"] >= snap.now - DAY]


def node_replaced(snap: Snapshot, t: Threshold) -> dict[str, str]:
    """Instance groups whose nodes HyperPod replaced more than `value` times in the last 24 hours."""
    counts = Counter(e["namespace"] for e in _recent(snap) if REPLACING.match(e["message"]))
    return {f"group/{g}": f"{n} node replacements in instance group {g} in the last 24 h (threshold {t.value:g})"
            for g, n in counts.items() if n > (t.value or 0)}


def xid_recurring(snap: Snapshot, t: Threshold) -> dict[str, str]:
    """The same GPU error (Xid) reported at least `value` times in one instance group in the last 24 hours."""
    counts: Counter[tuple[str, str]] = Counter()
    nodes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in _recent(snap):
        m = XID.search(e["message"])
        if m:
            key = (e["namespace"], m.group(1))
            counts[key] += 1
            nodes[key].add(e["object_name"])
    return {f"group/{g}/xid/{x}": f"Xid {x} reported {n} times in instance group {g} in the last 24 h (nodes "
            f"{', '.join(sorted(nodes[(g, x)]))})" for (g, x), n in counts.items() if n >= (t.value or 1)}


def capacity_stuck(snap: Snapshot, _t: Threshold) -> dict[str, str]:
    """Instance groups whose latest launch attempt failed for insufficient capacity (no instance launched since)."""
    last: dict[str, Obj] = {}
    for e in _recent(snap):
        if CAPACITY.match(e["message"]) or LAUNCHING.match(e["message"]):
            last[e["namespace"]] = e
    return {f"group/{g}": f"instance group {g} waits for capacity: {e['message'][:300]}"
            for g, e in last.items() if CAPACITY.match(e["message"])}


def pod_crash_looping(snap: Snapshot, _t: Threshold) -> dict[str, str]:
    """Pods that restarted and are either not ready or restarted again since the last evaluation (a crash-looping
    container is ready between crashes); opens once this held for `minutes`."""
    return {f"pod/{p['namespace']}/{p['name']}": f"pod {p['namespace']}/{p['name']} is crash-looping "
            f"({p['restarts']} restarts)" for p in snap.pods
            if p.get("restarts") and p.get("phase") in ("Running", "Pending")
            and (not p.get("ready") or f"{p['namespace']}/{p['name']}" in snap.restarted)}


def gpu_idle(snap: Snapshot, t: Threshold) -> dict[str, str]:
    """Nodes with GPUs allocated to pods whose DCGM utilisation averaged under `value` % over `minutes`."""
    return {f"node/{n}": f"node {n}: GPUs allocated but {u:.1f} % utilised on average (under {t.value:g} %)"
            for n, u in (snap.gpu_idle or {}).items() if u < (t.value or 0)}


def _condition(workload: Obj, ctype: str) -> Obj:
    return next((c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


def job_pending_quota(snap: Snapshot, _t: Threshold) -> dict[str, str]:
    """Queued jobs whose Kueue Workload waits for quota: not admitted, QuotaReserved False with Kueue's reason
    Pending (over its team's quota and nothing idle to borrow; a queue that does not exist is Inadmissible, not
    this); opens once this held for `minutes`."""
    out = {}
    for w in snap.workloads:
        if any(_condition(w, c).get("status") == "True" for c in ("Admitted", "Finished", "QuotaReserved")):
            continue
        quota = _condition(w, "QuotaReserved")
        if quota.get("status") != "False" or quota.get("reason") != "Pending":
            continue
        meta = w.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        owner = next((f"{o.get('kind')} {o.get('name')}" for o in meta.get("ownerReferences") or []),
                     f"Workload {name}")
        queue = (w.get("spec") or {}).get("queueName")
        out[f"workload/{ns}/{name}"] = (f"{owner} in {ns} waits for quota in queue {queue}: "
                                        f"{str(quota.get('message') or 'pending')[:300]}")
    return out


def lifecycle_changed(snap: Snapshot, _t: Threshold) -> dict[str, str]:
    """The cluster's lifecycle scripts that are no longer InstantStart's (changed or deleted behind our back)."""
    out = {}
    for problem in snap.lifecycle:
        uri = re.search(r"s3://\S+", problem)
        out[f"script/{uri.group(0) if uri else problem[:200]}"] = problem
    return out


def watch_stale(snap: Snapshot, _t: Threshold) -> dict[str, str]:
    """Watches of the cluster's Kubernetes API that are disconnected; opens once this held for `minutes`."""
    return {f"watch/{w['kind']}": f"the {w['kind']} watch is disconnected ({w.get('lastError') or w['state']})"
            for w in snap.watches if not w.get("connected") and w.get("state") not in ("absent", "stopped",
                                                                                         "starting")}


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("node_replaced", "A node of an instance group replaced more than N times in 24 h.",
         Threshold(3, 0), "replacements per day", node_replaced),
    Rule("xid_recurring", "The same GPU error (Xid) at least N times in an instance group in 24 h.",
         Threshold(2, 0), "occurrences per day", xid_recurring),
    Rule("capacity_stuck", "A replacement or launch waiting for capacity for N minutes.",
         Threshold(None, 30), "minutes", capacity_stuck),
    Rule("pod_crash_looping", "A pod crash-looping for N minutes.", Threshold(None, 60), "minutes", pod_crash_looping),
    Rule("job_pending_quota", "A queued job pending over its team's quota (Kueue) for N minutes.",
         Threshold(None, 60), "minutes", job_pending_quota),
    Rule("gpu_idle", "GPUs allocated but DCGM utilisation under N % for the hold time.", Threshold(5, 60),
         "percent", gpu_idle),
    Rule("lifecycle_script_changed", "A lifecycle script changed or deleted behind InstantStart's back.",
         Threshold(None, 0), "minutes", lifecycle_changed),
    Rule("watch_stale", "A Kubernetes watch of the cluster disconnected for N minutes.", Threshold(None, 10),
         "minutes", watch_stale),
)}


def thresholds(stored: dict[str, Any] | None) -> dict[str, Threshold]:
    """Every rule's threshold: the stored override (alert_rules_update) over the default."""
    out = {}
    for name, rule in RULES.items():
        over = (stored or {}).get(name) or {}
        out[name] = Threshold(
            value=float(over["value"]) if over.get("value") is not None else rule.default.value,
            minutes=int(over.get("minutes", rule.default.minutes)),
            enabled=bool(over.get("enabled", True)),
        )
    return out
