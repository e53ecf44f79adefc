"""Fleet validation objects: per-node check pods (DCGM diagnostic, EFA provider) and nccl-tests MPIJobs."""

from __future__ import annotations

from typing import Any

NAMESPACE = "default"
RUN_LABEL = "instantstart.io/validation"
CHECK_LABEL = "instantstart.io/validation-check"
NCCL_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:latest"  # the AWS samples' image: nccl-tests, EFA, aws-ofi-nccl
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:3.3.9-1-ubuntu22.04"
EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
ALL_REDUCE = "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 2G -f 2 -g 1 -c 1 -n 100"
TOLERATE_ALL = [{"operator": "Exists"}]  # a check must run on a node whatever taints its health agent set
LD_LIBRARY_PATH = "/opt/amazon/openmpi/lib:/opt/nccl/build/lib:/opt/amazon/efa/lib:/opt/aws-ofi-nccl/install/lib"
# Deadlines in the objects themselves: a validation cancelled mid-wait never leaves pods holding GPUs for long.
CHECK_DEADLINE_SECONDS = 1500
NCCL_DEADLINE_SECONDS = 2100


def _pinned(node: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}


def check_pod(run: str, check: str, node: str, index: int, gpus: int, efa: int) -> dict[str, Any]:
    """One check pod pinned to `node`: `dcgm` (`dcgmi diag -r 2` with every GPU) or `efa` (`fi_info -p efa` with
    the node's EFA devices mounted). The exit code is not the verdict: the parsed output is."""
    if check == "dcgm":
        image, script, limits = DCGM_IMAGE, "nv-hostengine && dcgmi diag -r 2; exit 0", {GPU: str(gpus)}
        # DCGM's containerised diagnostic needs SYS_ADMIN (NVIDIA's DCGM container documentation).
        security: dict[str, Any] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    else:
        image, script = NCCL_IMAGE, "/opt/amazon/efa/bin/fi_info -p efa; exit 0"
        limits = {EFA: str(efa)} if efa else {}
        security = {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{run}-{check}-{index}", "namespace": NAMESPACE,
                     "labels": {RUN_LABEL: run, CHECK_LABEL: check}},
        "spec": {"restartPolicy": "Never", "affinity": _pinned(node), "tolerations": TOLERATE_ALL,
                 "activeDeadlineSeconds": CHECK_DEADLINE_SECONDS,
                 "containers": [{"name": check, "image": image, "command": ["/bin/sh", "-c", script],
                                 "resources": {"limits": limits, "requests": dict(limits)},
                                 **({"securityContext": security} if security else {})}]},
    }


def nccl_mpijob(run: str, name: str, nodes: list[str], gpus: int, efa: int) -> dict[str, Any]:
    """An MPIJob (kubeflow.org/v2beta1, the AWS samples' nccl-tests job) running all_reduce_perf over `nodes`, one
    worker per node holding all its GPUs and EFA devices, one MPI rank per GPU, FI_PROVIDER=efa, NCCL_DEBUG=INFO
    (so the log says which network NCCL chose)."""
    np = len(nodes) * max(gpus, 1)
    resources = {GPU: str(gpus), **({EFA: str(efa)} if efa else {})}
    env = [{"name": "FI_PROVIDER", "value": "efa"}, {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
           {"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"},
           {"name": "LD_LIBRARY_PATH", "value": LD_LIBRARY_PATH}]
    mpirun = ["/opt/amazon/openmpi/bin/mpirun", "--allow-run-as-root", "--tag-output", "-np", str(np), "-N",
              str(max(gpus, 1)), "--bind-to", "none", "-x", "FI_PROVIDER", "-x", "FI_EFA_USE_DEVICE_RDMA",
              "-x", "NCCL_DEBUG", "-x", "NCCL_DEBUG_SUBSYS", "-x", "LD_LIBRARY_PATH",
              *ALL_REDUCE.split()]
    labels = {RUN_LABEL: run, CHECK_LABEL: "nccl"}
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "slotsPerWorker": max(gpus, 1),
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 2,
                          "activeDeadlineSeconds": NCCL_DEADLINE_SECONDS, "ttlSecondsAfterFinished": 3600},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"metadata": {"labels": labels}, "spec": {
                    "restartPolicy": "OnFailure", "tolerations": TOLERATE_ALL,
                    "containers": [{"name": "launcher", "image": NCCL_IMAGE, "env": env, "command": mpirun}]}}},
                "Worker": {"replicas": len(nodes), "template": {"metadata": {"labels": labels}, "spec": {
                    "tolerations": TOLERATE_ALL,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(nodes)}]}]}}},
                    "containers": [{"name": "worker", "image": NCCL_IMAGE, "command": ["/usr/sbin/sshd", "-De"],
                                    "resources": {"limits": resources, "requests": dict(resources)}}]}}},
            },
        },
    }


def pair_rounds(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """The ring of node pairs (each node in two pairs, so a slow pair can be pinned on one node), split into
    rounds in which no node appears twice (a round's jobs run at once)."""
    if len(nodes) < 2:
        return []
    ring = [(nodes[0], nodes[1])] if len(nodes) == 2 else [
        (nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]
    rounds: list[list[tuple[str, str]]] = []
    for pair in ring:
        for placed in rounds:
            if not {n for p in placed for n in p} & set(pair):
                placed.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds
