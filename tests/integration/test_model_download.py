"""Model download end to end on the twin, through MCP: a CPU-only Job that runs while every GPU is taken,
stages and copies a gated stand-in repo into the S3 claim with the manifest last, progress in the operation,
the token only in a Kubernetes Secret (secretKeyRef) that is gone afterwards, a second download a no-op."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from hyperpod_twin.sim.hf_hub import GATED_TOKEN, HUB
from instantstart.manifests import iam_policies as pol
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import control_plane, twin_client

TAG = "md1"
DATA = pol.data_prefix(TAG)  # the default claim mounts the cluster's data prefix of the project bucket
MODEL = "twin-org/gated-llama"
UNREACHABLE_HUB = "http://hf-mirror.invalid:8080"


def gpu_hog() -> dict[str, Any]:
    """A pod that takes the node's one GPU and keeps it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-hog"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture
def cp(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """A control plane that cannot reach the hub its Jobs fetch from (only the cluster's nodes can): what the hub
    refuses is found by the Job, not by the look-up before it."""
    with control_plane(twin, tmp_path, monkeypatch, hf_endpoint=UNREACHABLE_HUB) as running:
        yield running


def wait_pod_phase(core: k8s.CoreV1Api, name: str, phase: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while core.read_namespaced_pod(name, "default").status.phase != phase:
        assert time.monotonic() < deadline, f"{name} never {phase}"
        time.sleep(0.2)


def test_model_download_cpu_only_token_never_kept(
    cp: Running, twin: TwinProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    batch = k8s.BatchV1Api(core.api_client)
    s3: Any = twin_client(twin, "s3")
    ref = mcp_calls(cp, [("s3_storage_create", {})])[0]
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    bucket = mcp_calls(cp, [("s3_storage_get_defaults", {})])[0]["bucketName"]

    # Every GPU of the cluster is taken.
    core.create_namespaced_pod("default", gpu_hog())
    wait_pod_phase(core, "gpu-hog", "Running")
    nodes = core.list_node().items
    assert sum(int(n.status.capacity.get("nvidia.com/gpu", 0)) for n in nodes) == 1

    # A partial copy (files, no manifest) is never taken for a model.
    s3.put_object(Bucket=bucket, Key=f"{DATA}models/twin-org/half/main/config.json", Body=b"{}")

    # Bad input and a gated repo without the token.
    bad = mcp_raw(cp, [("model_download_enhanced", {"modelId": "no spaces allowed"})])[0]
    assert bad["isError"] and "modelId" in json.dumps(bad["payload"])
    denied = mcp_calls(cp, [("model_download_enhanced", {"modelId": MODEL, "revision": "main"})])[0]
    failed = mcp_wait(cp, denied["operationId"])
    assert failed["status"] == "FAILED" and "failed" in failed["error"]["message"], failed
    # The error carries the failed pod's last log lines (the control plane could not ask the hub: the Job ran).
    tail = failed["error"]["details"]["logTail"]
    assert any("401" in line and "restricted" in line for line in tail), failed["error"]
    assert tail[-1] in failed["error"]["message"] and len(tail) <= 20
    job_name = failed["params"]["jobName"]
    logs = core.read_namespaced_pod_log(
        core.list_namespaced_pod("default", label_selector=f"job-name={job_name}").items[0].metadata.name, "default")
    assert "401" in logs and "restricted" in logs
    batch.delete_namespaced_job(job_name, "default", propagation_policy="Foreground", _preload_content=False)
    deadline = time.monotonic() + 60
    while batch.list_namespaced_job("default").items:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    # The download with the token.
    ref = mcp_calls(cp, [("model_download_enhanced", {"modelId": MODEL, "hfToken": GATED_TOKEN})])[0]
    deadline = time.monotonic() + 60
    while not batch.list_namespaced_job("default").items:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    job = batch.list_namespaced_job("default").items[0]
    spec = core.api_client.sanitize_for_serialization(job)
    text = json.dumps(spec)
    assert GATED_TOKEN not in text and "nvidia.com/gpu\": " not in text.replace("nvidia.com/gpu.", "")
    container = spec["spec"]["template"]["spec"]["containers"][0]
    # An image that already holds huggingface_hub (the setting's pinned default); nothing installed at run time.
    assert container["image"] == Settings().model_download_image == "vllm/vllm-openai:v0.11.0"
    assert container["command"] == ["python3", "-c", "$(SCRIPT)"] and "pip" not in json.dumps(container["command"])
    assert "pip install" not in text
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert container["resources"]["requests"] == {"cpu": "4", "memory": "16Gi"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    token_env = next(e for e in container["env"] if e["name"] == "HF_TOKEN")
    assert set(token_env) == {"name", "valueFrom"} and set(token_env["valueFrom"]) == {"secretKeyRef"}
    secret_name = token_env["valueFrom"]["secretKeyRef"]["name"]
    volumes = {v["name"]: v for v in spec["spec"]["template"]["spec"]["volumes"]}
    assert volumes["nvme"]["hostPath"] == {"path": f"/opt/dlami/nvme/instantstart/{MODEL.replace('/', '--')}/main",
                                         "type": "DirectoryOrCreate"}  # only its own directory of the NVMe
    assert "emptyDir" in volumes["scratch"]
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "s3-claim"
    preferred = spec["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"][0]
    assert preferred["operator"] == "NotIn" and preferred["values"] == ["ml.g6.4xlarge"]

    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    out = view["stages"][0]["outputs"]
    files = HUB.repos[MODEL].revisions["main"]
    total = sum(len(b) for b in files.values())
    assert out["alreadyPresent"] is False, json.dumps(view["stages"])
    assert out["files"] == len(files) and out["totalBytes"] == total
    assert out["progress"] == {"files": len(files), "filesTotal": len(files), "bytes": total, "bytesTotal": total}
    # The pod ran with no GPU while the GPU pod kept it.
    pod = core.list_namespaced_pod("default", label_selector=f"job-name={out['jobName']}").items[0]
    assert pod.status.phase == "Succeeded" and pod.spec.node_name == nodes[0].metadata.name
    assert core.read_namespaced_pod("gpu-hog", "default").status.phase == "Running"
    log_lines = core.read_namespaced_pod_log(pod.metadata.name, "default").splitlines()
    assert any(line.startswith("staging on instance NVMe") for line in log_lines)
    progress_at = [i for i, line in enumerate(log_lines) if line.startswith("progress ")]
    assert len(progress_at) == len(files) and log_lines.index(f"done {len(files)} files") > progress_at[-1]

    # The objects and the manifest (last, with sizes and sha256).
    prefix = f"{DATA}models/{MODEL}/main/"
    objects = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    assert sorted(o["Key"][len(prefix):] for o in objects) == sorted([*files, "manifest.json"])
    stamps = {o["Key"][len(prefix):]: o["LastModified"] for o in objects}
    assert all(stamps["manifest.json"] >= t for t in stamps.values())
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "manifest.json")["Body"].read())
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        k: (len(v), hashlib.sha256(v).hexdigest()) for k, v in files.items()}

    # model_list and model_download_status read the manifests; the partial copy is not a model.
    listed = mcp_calls(cp, [("model_list", {})])[0]
    assert [(m["modelId"], m["revision"], m["files"]) for m in listed["models"]] == [(MODEL, "main", len(files))]
    status = mcp_calls(cp, [("model_download_status", {"modelId": MODEL})])[0]
    assert status["state"] == "COMPLETE" and len(status["files"]) == len(files)
    half = mcp_calls(cp, [("model_download_status", {"modelId": "twin-org/half"})])[0]
    assert half["state"] == "ABSENT"

    # The token's Secret is gone; the token is nowhere we keep or show anything.
    with pytest.raises(k8s.ApiException) as gone:
        core.read_namespaced_secret(secret_name, "default")
    assert gone.value.status == 404
    assert GATED_TOKEN not in json.dumps(view) and GATED_TOKEN not in json.dumps(listed)
    for path in tmp_path.glob("state.db*"):
        assert GATED_TOKEN.encode() not in path.read_bytes(), path
    # Every log record of this process except the test's own MCP client echoing the request it sends.
    leaks = [f"{r.name}: {r.getMessage()[:300]}" for r in caplog.records
             if GATED_TOKEN in r.getMessage() and not r.name.startswith("mcp.client.")]
    assert not leaks, leaks
    for op in (ref["operationId"], denied["operationId"]):
        assert GATED_TOKEN not in json.dumps(mcp_calls(cp, [("operation_get", {"operationId": op})])[0])

    # A second download of the same model and revision does nothing.
    again = mcp_wait(cp, mcp_calls(cp, [("model_download_enhanced", {"modelId": MODEL})])[0]["operationId"])
    assert again["status"] == "SUCCEEDED" and again["stages"][0]["outputs"]["alreadyPresent"] is True
    assert len(batch.list_namespaced_job("default").items) == 1
