"""Watch-fed totals: GPU requests per node follow pod changes incrementally; the node digest orders and counts."""

from __future__ import annotations

from typing import Any

from instantstart.services.base.watch.digest import digest
from instantstart.services.base.watch.state import Allocations


def pod(node: str | None, gpu: int, phase: str = "Running") -> dict[str, Any]:
    return {"node": node, "gpu": gpu, "neuron": 0, "phase": phase}


def test_allocations_follow_adds_moves_completions_and_deletes() -> None:
    alloc = Allocations()
    alloc.on_change("ADDED", "d/a", None, pod(None, 2, "Pending"))  # not bound yet: nothing allocated
    assert alloc.snapshot()[1] == {}
    alloc.on_change("MODIFIED", "d/a", pod(None, 2, "Pending"), pod("n1", 2))
    alloc.on_change("ADDED", "d/b", None, pod("n1", 1))
    assert alloc.snapshot()[1] == {"n1": {"gpu": 3, "neuron": 0}}
    alloc.on_change("MODIFIED", "d/b", pod("n1", 1), pod("n1", 1, "Succeeded"))  # finished pods free their GPUs
    alloc.on_change("DELETED", "d/a", pod("n1", 2), None)
    version, used = alloc.snapshot()
    assert used == {} and version == 4


def node(name: str, *, ready: bool = True, health: str = "Schedulable", gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "instanceType": "ml.p5.48xlarge", "instanceGroup": "g", "hyperpodCluster": "hp",
            "zone": None, "ready": ready, "schedulable": ready and health == "Schedulable", "healthStatus": health,
            "deepHealthCheck": None, "faultReasons": None, "taints": [], "gpuAllocatable": gpus,
            "neuronAllocatable": 0}


def test_the_digest_lists_nodes_needing_attention_first_and_totals_usable_gpus() -> None:
    nodes = {n["name"]: n for n in (node("a"), node("b", health="UnschedulablePendingReplacement"),
                                    node("c", ready=False), node("d"))}
    d = digest(nodes, {"a": {"gpu": 3, "neuron": 0}})
    assert [n["name"] for n in d.attention] == ["b", "c", "a", "d"]
    assert [n["name"] for n in d.by_name] == ["a", "b", "c", "d"]
    assert d.unhealthy_count == 2 and d.usable_count == 2 and d.usable_by_group[("g", "hp")] == 2
    t = d.totals["ml.p5.48xlarge"]
    assert (t["nodes"], t["ready"], t["gpu"], t["gpuUsed"], t["gpuFree"]) == (4, 2, 32, 3, 13)
