"""The node digest: every node with its accelerator requests, totals per instance type, usable nodes per group.

Computed once per change of the nodes or the pods (memoised by their versions), never per read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from instantstart.services.base.status_model import NodeStatus
from instantstart.services.base.status_reads import GPU

Obj = dict[str, Any]


def _expects_gpu(instance_type: str) -> bool:
    family = instance_type.removeprefix("ml.").split(".", 1)[0]
    return family[:1] in ("g", "p") and instance_type.startswith("ml.")


def unhealthy(node: Obj) -> bool:
    """Whether a node needs attention: not Ready, not schedulable, or HyperPod reports a problem."""
    return (
        not node["ready"]
        or not node["schedulable"]
        or node.get("healthStatus") not in (None, "Schedulable")
        or bool(node.get("faultReasons"))
        or node.get("deepHealthCheck") == "Failed"
    )


@dataclass
class NodeDigest:
    """What status and node reads need, derived from one version of the nodes and the pods."""

    by_name: list[Obj] = field(default_factory=list)  # every node (with gpusAllocated), sorted by name
    attention: list[Obj] = field(default_factory=list)  # unhealthy nodes first, then the rest, by name
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    usable_by_group: Counter[tuple[str | None, str | None]] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    node_count: int = 0
    usable_count: int = 0
    unhealthy_count: int = 0


def digest(nodes: dict[str, Obj], used: dict[str, dict[str, int]]) -> NodeDigest:
    """The digest of `nodes` (key → node view) with `used` ({node: {gpu, neuron}} requested by live pods)."""
    out = NodeDigest()
    rows = []
    for n in nodes.values():
        alloc = used.get(n["name"], {"gpu": 0, "neuron": 0})
        row = {**n, "gpusAllocated": alloc["gpu"], "neuronAllocated": alloc["neuron"]}
        rows.append(row)
        t = out.totals.setdefault(
            n["instanceType"], dict.fromkeys(("nodes", "ready", "gpu", "gpuUsed", "gpuFree", "neuron", "neuronUsed"), 0)
        )
        t["nodes"] += 1
        t["gpu"] += n["gpuAllocatable"]
        t["gpuUsed"] += alloc["gpu"]
        t["neuron"] += n["neuronAllocatable"]
        t["neuronUsed"] += alloc["neuron"]
        if n["ready"] and n["schedulable"]:
            t["ready"] += 1
            t["gpuFree"] += max(n["gpuAllocatable"] - alloc["gpu"], 0)
            out.usable_by_group[(n["instanceGroup"], n["hyperpodCluster"])] += 1
            out.usable_count += 1
        if n["ready"] and _expects_gpu(n["instanceType"]) and n["gpuAllocatable"] == 0 and n["healthStatus"]:
            out.problems.append(
                f"node {n['name']} ({n['instanceType']}) advertises no {GPU}: is the NVIDIA device "
                "plugin running (cluster_configure_dependencies)?"
            )
    rows.sort(key=lambda r: r["name"])
    out.by_name = rows
    sick = [r for r in rows if unhealthy(r)]
    out.attention = sick + [r for r in rows if not unhealthy(r)]
    out.unhealthy_count = len(sick)
    out.node_count = len(rows)
    out.totals = dict(sorted(out.totals.items()))
    return out


def node_status(row: Obj) -> NodeStatus:
    """The wire model of one digest row."""
    return NodeStatus(
        name=row["name"],
        instance_type=row["instanceType"],
        instance_group=row["instanceGroup"],
        zone=row["zone"],
        ready=row["ready"],
        schedulable=row["schedulable"],
        health_status=row["healthStatus"],
        deep_health_check=row["deepHealthCheck"],
        fault_reasons=row.get("faultReasons"),
        taints=row["taints"],
        gpus=row["gpuAllocatable"],
        gpus_allocated=row["gpusAllocated"],
        neuron_devices=row["neuronAllocatable"],
    )
