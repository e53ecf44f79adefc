"""HyperPod's drain of a node it updates (UpdateClusterSoftware): cordon the Node, evict its pods (not those of
DaemonSets, which run on every node), and uncordon the Node once the instance runs again."""

from __future__ import annotations

from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES, PODS
from hyperpod_twin.sim.kobj import Obj

# Marks a Node cordoned by the drain, so only the drain's own cordon is lifted (an operator's stays).
DRAINED_ANNOTATION = "twin.instantstart.io/drained-for"


def drain(sim: ClusterSim, node: Obj, status: str) -> Obj:
    """Cordon `node` and evict every pod on it that is not a DaemonSet's and has not finished; the Node as
    saved."""
    name = node["metadata"]["name"]
    if not node.get("spec", {}).get("unschedulable"):
        annotations = dict(node["metadata"].get("annotations") or {}, **{DRAINED_ANNOTATION: status})
        node = {**node, "metadata": {**node["metadata"], "annotations": annotations},
                "spec": {**node.get("spec", {}), "unschedulable": True}}
        node = sim.save(NODES, node)
        sim.event(node, "NodeNotSchedulable", f"Node {name} status is now: NodeNotSchedulable")
    for pod in sim.list(PODS):
        md, spec = pod["metadata"], pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        owners = md.get("ownerReferences") or []
        if spec.get("nodeName") != name or md.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
            continue
        if any(o.get("kind") == "DaemonSet" for o in owners):
            continue
        sim.event(pod, "Evicted", f"Evicted by SageMaker HyperPod: node {name} is {status} (software update)",
                  "Warning", source="sagemaker-hyperpod")
        sim.delete_pod(md["namespace"], md["name"])
    return node


def uncordon(sim: ClusterSim, node: Obj) -> Obj:
    """Lift the drain's cordon of `node` (a Node an operator cordoned stays cordoned)."""
    annotations = dict(node["metadata"].get("annotations") or {})
    if annotations.pop(DRAINED_ANNOTATION, None) is None:
        return node
    spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "unschedulable"}
    node = sim.save(NODES, {**node, "metadata": {**node["metadata"], "annotations": annotations}, "spec": spec})
    sim.event(node, "NodeSchedulable", f"Node {node['metadata']['name']} status is now: NodeSchedulable")
    return node
