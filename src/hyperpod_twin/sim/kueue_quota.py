"""Kueue's quota arithmetic for the twin's Kueue: ClusterQueues in a cohort, each with a nominal quota per flavor
and resource, a borrowingLimit (how far above nominal it may go) and a lendingLimit (how much of its nominal
quota others may use; unset: all of it). What a queue does not lend is guaranteed to it; what it lends is a pool
every queue of the cohort draws from once past its guaranteed part. Pure: no objects are read or written."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj

INF = float("inf")
Cell = tuple[str, str]  # (flavor, resource)


@dataclass
class Queue:
    """One ClusterQueue's quotas by (flavor, resource) and what its admitted workloads use."""

    name: str
    cohort: str
    flavors: list[str]
    covered: set[str]
    nominal: dict[Cell, float]
    borrowing: dict[Cell, float]
    lending: dict[Cell, float]
    used: dict[Cell, float] = field(default_factory=lambda: defaultdict(float))
    preempts_lower: bool = False  # withinClusterQueue: a workload preempts lower-priority ones of its queue

    def guaranteed(self, cell: Cell) -> float:
        """The part of the nominal quota no other queue may use."""
        return self.nominal.get(cell, 0.0) - self.lendable(cell)

    def lendable(self, cell: Cell) -> float:
        """The part of the nominal quota it lends to the cohort's pool."""
        return min(self.lending.get(cell, INF), self.nominal.get(cell, 0.0))

    def drawn(self, cell: Cell, used: float | None = None) -> float:
        """What its usage takes from the cohort's pool."""
        return max(0.0, (self.used[cell] if used is None else used) - self.guaranteed(cell))

    def borrowed(self, cell: Cell) -> float:
        """Usage above the nominal quota (taken from other queues' idle quota)."""
        return max(0.0, self.used[cell] - self.nominal.get(cell, 0.0))


def parse_queue(cq: Obj) -> Queue:
    """A ClusterQueue object as a Queue (its resource groups flattened)."""
    spec = cq.get("spec") or {}
    queue = Queue(cq["metadata"]["name"], str(spec.get("cohort") or ""), [], set(), {}, {}, {})
    queue.preempts_lower = (spec.get("preemption") or {}).get("withinClusterQueue") in (
        "LowerPriority", "LowerOrNewerEqualPriority")
    for group in spec.get("resourceGroups") or []:
        queue.covered.update(group.get("coveredResources") or [])
        for flavor in group.get("flavors") or []:
            queue.flavors.append(flavor["name"])
            for res in flavor.get("resources") or []:
                cell = (flavor["name"], res["name"])
                queue.nominal[cell] = kobj.quantity(res.get("nominalQuota"))
                if res.get("borrowingLimit") is not None:
                    queue.borrowing[cell] = kobj.quantity(res["borrowingLimit"])
                if res.get("lendingLimit") is not None:
                    queue.lending[cell] = kobj.quantity(res["lendingLimit"])
    return queue


def _pool(queues: list[Queue], cohort: str, cell: Cell) -> tuple[float, float]:
    """(the cohort's lendable quota, what its queues draw from it) for one cell."""
    members = [q for q in queues if cohort and q.cohort == cohort]
    return sum(q.lendable(cell) for q in members), sum(q.drawn(cell) for q in members)


@dataclass(frozen=True)
class Verdict:
    """Whether a workload fits a queue in a flavor now; else the first reason (Kueue's wording)."""

    fits: bool
    borrows: bool = False
    reason: str = ""
    within_nominal: bool = False  # it would fit under the queue's nominal quota were nothing borrowed from it


def fit(queue: Queue, queues: list[Queue], flavor: str, need: dict[str, float], pod_set: str) -> Verdict:
    """Can `need` be admitted to `queue` in `flavor` now?"""
    borrows, within, reasons = False, True, []
    for res, amount in sorted(need.items()):
        if amount <= 0:
            continue
        if res not in queue.covered:
            return Verdict(False, reason=f"couldn't assign flavors to pod set {pod_set}: resource {res} unavailable "
                           f"in ClusterQueue")
        cell = (flavor, res)
        after = queue.used[cell] + amount
        maximum = queue.nominal.get(cell, 0.0) + (queue.borrowing.get(cell, INF) if queue.cohort else 0.0)
        within = within and after <= queue.nominal.get(cell, 0.0)
        if after > maximum:
            reasons.append(f"couldn't assign flavors to pod set {pod_set}: insufficient quota for {res} in flavor "
                           f"{flavor}, request > maximum capacity ({_n(after)} > {_n(maximum)})")
            continue
        if after <= queue.guaranteed(cell):
            continue
        lendable, drawn = _pool(queues, queue.cohort, cell) if queue.cohort else (queue.lendable(cell),
                                                                                  queue.drawn(cell))
        extra = queue.drawn(cell, after) - queue.drawn(cell)
        if extra > lendable - drawn:
            reasons.append(f"couldn't assign flavors to pod set {pod_set}: insufficient unused quota for {res} in "
                           f"flavor {flavor}, {_n(extra - (lendable - drawn))} more needed")
        borrows = borrows or after > queue.nominal.get(cell, 0.0)
    if reasons:
        return Verdict(False, reason=reasons[0], within_nominal=within)
    return Verdict(True, borrows=borrows, within_nominal=within)


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
