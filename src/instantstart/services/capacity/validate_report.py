"""cluster_validate's verdict: per node (DCGM, EFA, NCCL pairs) and per pair, stragglers, each with the next step."""

from __future__ import annotations

from typing import Any

STRAGGLER_RATIO = 0.7
"""A node is a straggler when the best pair it is in reaches less than this share of the best pair of its
instance type: a slow node drags both of its ring pairs down while its neighbours each keep one fast pair. (Not the
median: a node without EFA also drags two pairs down, and with four nodes that would pull the median to the slow
node's level.)"""

REBOOT = "hyperpod_node_reboot"
REPLACE = "hyperpod_node_replace"


def _step(tool: str, node: str, why: str) -> dict[str, Any]:
    return {"tool": tool, "arguments": {"nodeId": node}, "why": why}


def node_verdicts(checks: dict[str, Any], nccl: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node: its checks, its best pair bandwidth, its problems and the next step for each."""
    facts = checks.get("nodes") or {}
    pairs = [p for p in nccl.get("pairs") or [] if p.get("busbwGbps") is not None]
    rows: list[dict[str, Any]] = []
    for name, node in sorted(facts.items()):
        mine = [p for p in nccl.get("pairs") or [] if name in p["nodes"]]
        measured = [p["busbwGbps"] for p in mine if p.get("busbwGbps") is not None]
        best = max(measured) if measured else None
        alike = [p["busbwGbps"] for p in pairs
                 if all((facts.get(n) or {}).get("instanceType") == node.get("instanceType") for n in p["nodes"])]
        reference = max(alike or [p["busbwGbps"] for p in pairs] or [0.0])
        problems: list[dict[str, Any]] = []
        dcgm, efa = node.get("dcgm") or {}, node.get("efa") or {}
        if dcgm.get("status") == "failed":
            failed = ", ".join(dcgm.get("failed") or [])
            problems.append({"check": "dcgm", "problem": f"DCGM diagnostic failed: {failed}",
                             "nextStep": _step(REPLACE, name, "a GPU failed the DCGM diagnostic: new hardware")})
        if efa.get("status") == "missing":
            problems.append({"check": "efa", "problem": "fi_info -p efa found no EFA provider on a node whose "
                             "instance type has EFA devices; NCCL falls back to TCP sockets here",
                             "nextStep": _step(REPLACE, name, "the EFA device is missing or broken: new hardware "
                                               "(a reboot does not bring an EFA device back)")})
        for check, result in (("dcgm", dcgm), ("efa", efa)):
            if result.get("status") == "not-run":
                problems.append({"check": check, "problem": f"the {check} check did not run: {result.get('reason')}",
                                 "nextStep": _step(REBOOT, name, "the node could not run a check pod; reboot it, then "
                                                   "run cluster_validate again")})
        failed_pairs = [p for p in mine if p.get("status") == "failed"]
        straggler = bool(best is not None and reference and best < STRAGGLER_RATIO * reference)
        if straggler and efa.get("status") == "missing":
            efa_problem = next(p for p in problems if p["check"] == "efa")
            efa_problem["problem"] += f" (its best pair reached {best:.2f} GB/s bus bandwidth, the best pair "\
                                       f"{reference:.2f} GB/s)"
        elif straggler:
            problems.append({"check": "nccl", "problem": f"straggler: its best pair reached {best:.2f} GB/s bus "
                             f"bandwidth, the best pair of its instance type {reference:.2f} GB/s",
                             "nextStep": _step(REBOOT, name, "slow interconnect: reboot, run cluster_validate again, "
                                               f"and {REPLACE} if it is still slow")})
        elif mine and len(failed_pairs) == len(mine):
            problems.append({"check": "nccl", "problem": "every all-reduce test this node was in failed",
                             "nextStep": _step(REBOOT, name, "reboot, then run cluster_validate again")})
        rows.append({
            "node": name, "instanceType": node.get("instanceType"), "gpus": node.get("gpus"),
            "efaDevices": node.get("efaDevices"), "dcgm": dcgm.get("status"), "efa": efa.get("status"),
            "bestPairBusbwGbps": best, "straggler": straggler,
            "verdict": "failed" if problems else "passed", "problems": problems,
        })
    return rows


def report(outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The operation's result from its stage outputs: nodes, pairs, the all-node run, who failed and why."""
    checks = outputs.get("checks") or {}
    nccl = outputs.get("nccl") or {}
    nodes = node_verdicts(checks, nccl)
    failed = [n["node"] for n in nodes if n["verdict"] == "failed"]
    return {
        "nodes": nodes,
        "pairs": nccl.get("pairs") or [],
        "allNodes": nccl.get("all"),
        "ncclSkipped": nccl.get("skipped"),
        "stragglers": [n["node"] for n in nodes if n["straggler"]],
        "failedNodes": failed,
        "passed": not failed and not nccl.get("skipped") and bool(nodes),
        "summary": (f"{len(nodes) - len(failed)} of {len(nodes)} nodes passed"
                    + (f"; fix: {', '.join(failed)}" if failed else "")),
    }
