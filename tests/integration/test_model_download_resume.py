"""Model download robustness on the twin: the token Secret never outlives a call whose operation was not
submitted (a retry writes none, a refused call deletes its own), and a control plane killed -9 while the
download Job runs resumes the operation: one Job, one pod, one copy with its manifest, the Secret gone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from hyperpod_twin.sim.hf_hub import GATED_TOKEN, HUB
from instantstart.manifests.iam_policies import data_prefix
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running, process_server
from tests.support.twin import control_plane_env, twin_client
from tests.support.waits import wait_terminal

MIRROR = "http://hf-mirror.internal:8080"
SLOW = "twin-org/slow-llama"  # gated, one file every 600 twin seconds
COMPONENT = "app.kubernetes.io/component=model-download"


def token_secrets(core: k8s.CoreV1Api) -> list[str]:
    return sorted(s.metadata.name for s in core.list_namespaced_secret("default", label_selector=COMPONENT).items)


def wait_running_download(core: k8s.CoreV1Api, timeout: float = 60.0) -> str:
    """The download pod's name once it runs."""
    deadline = time.monotonic() + timeout
    while True:
        pods = core.list_namespaced_pod("default", label_selector=COMPONENT).items
        running = [p.metadata.name for p in pods if p.status.phase == "Running"]
        if running:
            return running[0]
        assert time.monotonic() < deadline, "the download pod never ran"
        time.sleep(0.1)


def test_token_secret_not_left_when_the_call_is_refused_or_replayed(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_hyperpod(client, "mdr1")
    core = kube(twin, tmp_path, "mdr1")
    assert mcp_wait(cp, mcp_calls(cp, [("s3_storage_create", {})])[0]["operationId"])["status"] == "SUCCEEDED"

    args = {"modelId": SLOW, "hfToken": GATED_TOKEN, "clientToken": "dl-slow-1"}
    first = mcp_calls(cp, [("model_download_enhanced", args)])[0]
    wait_running_download(core)
    secret = mcp_calls(cp, [("operation_get", {"operationId": first["operationId"]})])[0]["params"]["tokenSecretName"]
    assert token_secrets(core) == [secret]
    # A retry with the same clientToken returns the same operation and writes no second Secret.
    again = mcp_calls(cp, [("model_download_enhanced", args)])[0]
    assert again["operationId"] == first["operationId"] and token_secrets(core) == [secret]
    # A second download of the same model while the first runs is refused after its Secret was written:
    # that Secret is deleted again, and the running download keeps its own.
    refused = mcp_raw(cp, [("model_download_enhanced", {"modelId": SLOW, "hfToken": GATED_TOKEN})])[0]
    assert refused["isError"] and refused["payload"]["error"]["code"] == "CONFLICT", refused
    assert token_secrets(core) == [secret]

    view = mcp_wait(cp, first["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["stages"][0]["outputs"]["files"] == len(HUB.repos[SLOW].revisions["main"])
    assert view["stages"][0]["outputs"]["hubEndpoint"] == twin.info["hub_url"]  # the twin's hub stand-in
    assert token_secrets(core) == []


def test_kill_9_mid_download_resumes_with_one_job(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in twin.env.items():  # the test's own Kubernetes client signs its EKS token with these
        monkeypatch.setenv(key, value)
    data, db = tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}"
    env = {**control_plane_env(twin), "INSTANTSTART_HF_ENDPOINT": MIRROR}
    files = HUB.repos[SLOW].revisions["main"]
    s3: Any = twin_client(twin, "s3")
    with process_server(data, db, extra_env=env) as (running, proc), running.client() as client:
        make_hyperpod(client, "mdr2")
        ref = client.post("/api/v1/storage/s3", json={})
        assert wait_terminal(client, ref.json()["operationId"], timeout=60)["status"] == "SUCCEEDED"
        bucket = client.get("/api/v1/storage/s3/defaults").json()["bucketName"]
        started = client.post("/api/v1/models/download", json={"modelId": SLOW, "hfToken": GATED_TOKEN})
        assert started.status_code == 202, started.text
        operation_id = started.json()["operationId"]
        prefix = f"{data_prefix('mdr2')}models/{SLOW}/main/"  # the cluster's data prefix of the bucket
        # Kill -9 once the Job has copied a file but not the manifest.
        deadline = time.monotonic() + 60
        while not s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents"):
            assert time.monotonic() < deadline, "the download never copied a file"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
        assert prefix + "manifest.json" not in keys and len(keys) < len(files), keys
    core = kube(twin, tmp_path, "mdr2")
    batch = k8s.BatchV1Api(core.api_client)

    def job_uids() -> set[str]:
        return {j.metadata.uid for j in batch.list_namespaced_job("default", label_selector=COMPONENT).items}

    original = job_uids()
    assert len(original) == 1
    # The configured hub mirror reached the Job as HF_ENDPOINT.
    job = batch.list_namespaced_job("default", label_selector=COMPONENT).items[0]
    job_env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    assert job_env["HF_ENDPOINT"] == MIRROR
    seen: set[str] = set()
    with process_server(data, db, extra_env=env) as (running, _proc), running.client() as client:
        deadline = time.monotonic() + 120
        while (view := client.get(f"/api/v1/operations/{operation_id}").json())["status"] in ("PENDING", "RUNNING"):
            seen |= job_uids()  # every Job that exists while the resumed operation runs
            assert time.monotonic() < deadline, view
            time.sleep(0.1)
        assert view["status"] == "SUCCEEDED", view
        status = client.get("/api/v1/models/status", params={"modelId": SLOW}).json()
        assert status["state"] == "COMPLETE" and status["hubEndpoint"] == MIRROR
        assert client.get("/api/v1/models").json()["hubEndpoint"] == MIRROR
    # The finished Job may already be gone (ttlSecondsAfterFinished on the twin clock), but no other ever existed.
    assert seen <= original and job_uids() <= original, (seen, original)
    assert token_secrets(core) == []
    objects = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    assert sorted(o["Key"][len(prefix):] for o in objects) == sorted([*files, "manifest.json"])
    assert len(s3.list_objects_v2(Bucket=bucket, Prefix=data_prefix("mdr2") + "models/")["Contents"]) == len(files) + 1
