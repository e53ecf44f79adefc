"""A finished training job's logs outlive its pods: kept pods by default (cleanPodPolicy None), and with observability
logging on, the twin's collector ships pod lines to the cluster's CloudWatch group, which training_job_logs reads
once the pods are deleted (`source` says where the lines came from). The pod's requests schedule on the twin."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal

TAG = "logs1"
JOB = {"jobName": "short", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge",
       "s3Claim": None}


def _logs(cp: Running, **args: Any) -> dict[str, Any]:
    [result, _description] = mcp_raw(cp, [("training_job_logs", {"jobName": "short", **args})])
    return dict(result)


def test_a_completed_jobs_lines_come_from_its_pods_then_from_cloudwatch(cp: Running, twin: TwinProcess,
                                                                       tmp_path: Any) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
        deps = client.post("/api/v1/clusters/dependencies", json={})
        assert wait_terminal(client, deps.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    [enable] = mcp_calls(cp, [("hyperpod_update_advanced_features", {
        "trainingOperator": {"enabled": True}, "observability": {"enabled": True, "logging": True}})])
    assert mcp_wait(cp, enable["operationId"], limit=300)["status"] == "SUCCEEDED"

    [ref] = mcp_calls(cp, [("training_job_submit", JOB)])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    core = kube(twin, tmp_path, TAG)
    pod = core.read_namespaced_pod("short-pod-0", "default")
    requests = pod.spec.containers[0].resources.requests
    # ml.g6.4xlarge, one node: its GPU, 14 of 16 vCPUs and 51 of 64 GiB after reservations, no EFA.
    assert requests == {"nvidia.com/gpu": "1", "cpu": "14", "memory": f"{51 * 1024}Mi"}

    def completed() -> bool:
        [status] = mcp_calls(cp, [("job_get_status", {"jobName": "short"})])
        return bool(status["job"]["state"] == "Completed")

    until(completed, "the job Completed", timeout=120, every=0.2)
    from_pods = _logs(cp)
    assert not from_pods["isError"], from_pods
    live = from_pods["payload"]
    assert live["source"] == "pods" and live["pods"] == ["short-pod-0"]
    assert "training complete" in live["lines"], live  # the finished pod was kept (cleanPodPolicy None)

    core.delete_namespaced_pod("short-pod-0", "default", grace_period_seconds=0)

    def shipped() -> dict[str, Any] | None:
        got = _logs(cp)
        return got["payload"] if not got["isError"] and got["payload"]["source"] == "cloudwatch" else None

    kept = until(shipped, "the job's lines read from CloudWatch after its pod is gone", timeout=120,
                 every=0.2)
    assert kept["pod"] == "short-pod-0" and kept["pods"] == ["short-pod-0"]
    assert kept["lines"] == live["lines"]
    arn = twin_client(twin, "sagemaker").describe_cluster(ClusterName=f"hp-cluster-{TAG}")["ClusterArn"]
    assert kept["logGroup"] == f"/aws/sagemaker/Clusters/hp-cluster-{TAG}/{arn.rsplit('/', 1)[-1]}"

    missing = _logs(cp, pod="short-pod-7")
    assert missing["isError"] and missing["payload"]["error"]["code"] == "NOT_FOUND"
