"""A model download can never keep a GPU pod from scheduling: its Job runs at the background PriorityClass
(below every workload, preemptionPolicy Never), so when a GPU pod needs the node the download occupies, the
twin's kube-scheduler preempts the download (DisruptionTarget, Preempted event, graceful delete) and binds the
GPU pod there; the download's retry waits and never preempts back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from hyperpod_twin.sim.hf_hub import GATED_TOKEN
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import Running
from tests.support.waits import until

TAG = "md3"
SLOW = "twin-org/slow-llama"  # a file every 10 twin minutes: the download is still running when the GPU pod comes


def _gpu_pod() -> dict[str, Any]:
    """A training-like pod: the node's GPU and 8 CPUs (which the download's 12 leave no room for)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": "8", "memory": "8Gi"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


def _download_pods(core: k8s.CoreV1Api, job: str) -> list[Any]:
    return list(core.list_namespaced_pod("default", label_selector=f"job-name={job}").items)


def test_a_gpu_pod_preempts_a_download_on_its_node(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)  # one ml.g6.4xlarge: 16 vCPUs, one GPU, the only node
    core = kube(twin, tmp_path, TAG)
    ref = mcp_calls(cp, [("s3_storage_create", {})])[0]
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"

    ref = mcp_calls(cp, [("model_download_enhanced", {"modelId": SLOW, "hfToken": GATED_TOKEN, "cpu": "12"})])[0]
    job = ref.get("jobName") or until(lambda: mcp_calls(cp, [("operation_get", {"operationId": ref["operationId"]})])[0]
                                      ["params"].get("jobName"), "the Job's name")
    first = until(lambda: [p for p in _download_pods(core, job) if p.status.phase == "Running"], "download running")[0]
    node = first.spec.node_name
    assert first.spec.priority_class_name == "instantstart-background" and first.spec.priority == -10
    assert first.spec.preemption_policy == "Never"
    assert k8s.SchedulingV1Api(core.api_client).read_priority_class("instantstart-background").value == -10
    policy = k8s.BatchV1Api(core.api_client).read_namespaced_job(job, "default").spec.pod_failure_policy
    assert policy.rules[0].action == "Ignore" and policy.rules[0].on_pod_conditions[0].type == "DisruptionTarget"

    # The GPU pod (default priority 0) fits only where the download runs: the download is preempted.
    core.create_namespaced_pod("default", _gpu_pod())
    trainer = until(lambda: (lambda p: p if p.status.phase == "Running" else None)(
        core.read_namespaced_pod("trainer", "default")), "the GPU pod Running", timeout=120)
    assert trainer.spec.node_name == node and trainer.spec.priority == 0
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={first.metadata.name}").items
    preempted = [e for e in events if e.reason == "Preempted"]
    assert preempted and f"on node {node}" in preempted[0].message, [e.reason for e in events]
    until(lambda: all(p.metadata.uid != first.metadata.uid for p in _download_pods(core, job)), "the victim gone")

    # The Job's next pod waits (it never preempts), and the GPU pod keeps its node.
    retry = until(lambda: _download_pods(core, job), "the download's retry pod")[0]
    until(lambda: any(c.type == "PodScheduled" and c.status == "False" and "Insufficient cpu" in (c.message or "")
                      for c in (core.read_namespaced_pod(retry.metadata.name, "default").status.conditions or [])),
          "the retry Unschedulable")
    assert core.read_namespaced_pod("trainer", "default").status.phase == "Running"
    assert not core.read_namespaced_pod(retry.metadata.name, "default").spec.node_name
