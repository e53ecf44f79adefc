"""Jobs as training_job_submit renders them schedule on twin nodes by GPUs, Neuron devices, EFA, cpu and memory."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.sim.plugin import install_crds
from instantstart.manifests import training as training_manifests
from instantstart.services.training import checks
from instantstart.services.training.submit import JobShape
from tests.support.sim import SimCluster


def _job(name: str, instance_type: str, nodes: int, gpus: int | None = None) -> dict[str, Any]:
    shape = JobShape(job_name=name, instance_type=instance_type, nodes=nodes, gpus_per_node=gpus)
    body = training_manifests.job(
        training_manifests.JobSpec(
            name=name,
            namespace="default",
            image="example/train:1",
            entry=["train.py"],
            nodes=nodes,
            nproc_per_node="auto",
            resources=checks.pod_resources(shape),
            instance_type=instance_type,
            pod_annotations={"twin.instantstart.io/run-seconds": "600"},
        )
    )
    return body


def _pods(cluster: SimCluster, job: str) -> list[dict[str, Any]]:
    return [p for p in cluster.list("", "pods", "default") if p["metadata"].get("labels", {}).get("HPJob") == job]


def test_whole_node_p5_and_trn1_pods_schedule_and_a_third_p5_pod_waits_for_efa(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    cluster.add_node("i-0ccccccccccccccc1", "ml.p5.48xlarge", group="p5")
    cluster.add_node("i-0ccccccccccccccc2", "ml.p5.48xlarge", group="p5")
    cluster.add_node("i-0ccccccccccccccc3", "ml.trn1.32xlarge", group="trn")
    cluster.advance(5)
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", _job("big", "ml.p5.48xlarge", 2))
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", _job("neuron", "ml.trn1.32xlarge", 1))
    cluster.advance(5)
    big = _pods(cluster, "big")
    assert len(big) == 2 and all(p["status"]["phase"] == "Running" for p in big)
    assert len({p["spec"]["nodeName"] for p in big}) == 2  # one whole node each: 8 GPUs, 32 EFA, 179 cores
    [trn] = _pods(cluster, "neuron")
    assert trn["status"]["phase"] == "Running" and trn["spec"]["nodeName"] == "hyperpod-i-0ccccccccccccccc3"
    env = {e["name"]: e.get("value") for e in trn["spec"]["containers"][0]["env"]}
    # nprocPerNode auto: one process per Neuron device the pod asks for; one node, so no EFA env.
    assert env["NPROC_PER_NODE"] == "16" and "FI_PROVIDER" not in env
    # Half a p5 for two more nodes: GPUs would fit nowhere anyway, but EFA, cpu and memory are named too.
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", _job("more", "ml.p5.48xlarge", 2, gpus=4))
    cluster.advance(5)
    waiting = _pods(cluster, "more")
    assert waiting and all(p["status"]["phase"] == "Pending" for p in waiting)
    cond = next(c for c in waiting[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    for resource in ("nvidia.com/gpu", "vpc.amazonaws.com/efa", "cpu", "memory"):
        assert f"Insufficient {resource}" in cond["message"], cond["message"]
