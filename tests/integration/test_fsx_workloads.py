"""FSx for Lustre claims in workloads on the twin, through REST and MCP: fsxClaim refused unless it names an FSx
claim InstantStart created in the namespace (each refusal names the FSx claims that exist); a HyperPodPyTorchJob
with the claim at /fsx runs (the twin's FSx CSI node plugin mounts it); a model downloaded into the claim lands on
the file system; a vLLM server serves it from /fsx (and one pointed at a path with no model cannot start)."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client as k8s

from instantstart.manifests import ray_job, training
from instantstart.twin_process import TwinProcess
from tests.support.flows import hand_made_fsx_claim, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import shared_control_plane
from tests.support.waits import until, wait_terminal

TAG = "fsxw1"
MODEL = "twin-org/tiny-llama"
MODEL_PATH = f"/fsx/models/{MODEL}/main"


def _ok(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    ref = client.post(path, json=body)
    assert ref.status_code == 202, ref.text
    view = wait_terminal(client, ref.json()["operationId"], timeout=240)
    assert view["status"] == "SUCCEEDED", view
    return view


def _prepare(client: httpx.Client) -> None:
    """A HyperPod cluster (one ml.g6.4xlarge), its S3 claim, an FSx claim `shared`, the training and KubeRay
    operators."""
    make_hyperpod(client, TAG)
    _ok(client, "/api/v1/storage/s3", {})
    _ok(client, "/api/v1/storage/fsx", {"name": "shared", "enableCsiDriver": True, "deploymentType": "SCRATCH_2"})
    ref = client.post("/api/v1/capacity/advanced-features", json={"trainingOperator": {"enabled": True},
                                                                   "kuberayOperator": {"enabled": True}})
    assert ref.status_code == 202, ref.text
    assert wait_terminal(client, ref.json()["operationId"], timeout=240)["status"] == "SUCCEEDED"


shared_cp = shared_control_plane(_prepare)


def _error(result: Any) -> dict[str, Any]:
    assert result["isError"], result
    error: dict[str, Any] = result["payload"]["error"]
    return error


def _hand_made_claim(core: k8s.CoreV1Api, name: str, labels: dict[str, str] | None = None) -> None:
    """A PV and claim on the same file system made with kubectl (by default without InstantStart's labels)."""
    ours = core.read_persistent_volume("shared-pv").spec.csi
    hand_made_fsx_claim(core, name, {"driver": "fsx.csi.aws.com", "volumeHandle": ours.volume_handle,
                                     "volumeAttributes": ours.volume_attributes}, labels)


def test_fsx_claim_refusals_name_the_fsx_claims(shared_cp: Running, twin_process: TwinProcess, tmp_path: Any) -> None:
    core = kube(twin_process, tmp_path, TAG)
    _hand_made_claim(core, "byhand")
    # Labels copied from InstantStart's claim prove nothing: only the claims fsx_storage_create recorded count.
    _hand_made_claim(core, "forged", {**core.read_persistent_volume("shared-pv").metadata.labels,
                                      "instantstart.io/storage": "forged"})
    job = {"jobName": "fsx-bad", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge"}
    missing, s3, by_hand, unset, download, deploy, forged, description = mcp_raw(shared_cp, [
        ("training_job_submit", {**job, "fsxClaim": "nope"}),
        ("training_job_submit", {**job, "fsxClaim": "s3-claim"}),
        ("training_job_submit", {**job, "fsxClaim": "byhand"}),
        ("training_job_submit", {**job, "command": "train.py --data /fsx/data"}),
        ("model_download_enhanced", {"modelId": MODEL, "fsxStorage": "nope"}),
        ("inference_deploy_container", {"deploymentCommand": f"vllm serve {MODEL_PATH}", "gpuCount": 1,
                                        "fsxClaim": "byhand"}),
        ("ray_job_submit", {"jobName": "fsx-bad", "image": "example/ray:1", "instanceType": "ml.g6.4xlarge",
                            "entrypoint": "python3 a.py", "fsxClaim": "forged"}),
    ])
    assert "fsxClaim names one InstantStart created, an FSx claim at /fsx" in " ".join(description.split())
    error = _error(missing)
    assert error["code"] == "NOT_FOUND" and "fsxClaim: namespace default has no claim nope" in error["message"]
    assert "namespace default: shared." in error["hint"] and "fsx_storage_create" in error["hint"]
    error = _error(s3)
    assert error["code"] == "INVALID_INPUT", error
    assert "fsxClaim: claim default/s3-claim is not an FSx for Lustre claim for cluster" in error["message"]
    assert "shared" in error["hint"]
    for result, name in ((by_hand, "byhand"), (deploy, "byhand"), (forged, "forged")):
        error = _error(result)
        assert error["code"] == "INVALID_INPUT", error
        assert f"default/{name} is not an FSx for Lustre claim InstantStart created" in error["message"]
        assert "namespace default: shared." in error["hint"]  # the hand-made claim is not offered
    error = _error(unset)
    assert error["code"] == "INVALID_INPUT" and "uses /fsx, but fsxClaim is not set" in error["message"], error
    error = _error(download)
    assert error["code"] == "NOT_FOUND" and error["message"].startswith("fsxStorage:"), error
    # Nothing was submitted.
    assert k8s.CustomObjectsApi(core.api_client).list_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs")["items"] == []
    for name in ("byhand", "forged"):
        core.delete_namespaced_persistent_volume_claim(name, "default", _preload_content=False)
        core.delete_persistent_volume(f"{name}-pv", _preload_content=False)


def test_training_job_mounts_fsx_and_runs(shared_cp: Running, twin_process: TwinProcess, tmp_path: Any) -> None:
    core = kube(twin_process, tmp_path, TAG)
    with shared_cp.client() as client:
        ref = client.post("/api/v1/training/jobs", json={
            "jobName": "fsx-train", "image": "example/train:1", "command": "train.py --data /fsx/data",
            "instanceType": "ml.g6.4xlarge", "fsxClaim": "shared"})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
    pod = until(lambda: next(iter(core.list_namespaced_pod(
        "default", label_selector="app.kubernetes.io/managed-by=instantstart").items), None), "the job's pod")
    volumes = {v.name: v for v in pod.spec.volumes}
    assert volumes["fsx"].persistent_volume_claim.claim_name == "shared"
    mounts = {m.name: m for m in pod.spec.containers[0].volume_mounts}
    assert mounts["fsx"].mount_path == "/fsx" and not mounts["fsx"].read_only
    # The twin's FSx CSI node plugin mounted the file system (AVAILABLE, Lustre ports open): the pod runs.
    until(lambda: core.read_namespaced_pod(pod.metadata.name, "default").status.phase in ("Running", "Succeeded"),
          "the training pod running on the FSx mount")
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={pod.metadata.name}").items
    assert [e.message for e in events if e.reason == "FailedMount"] == []
    [gone] = mcp_calls(shared_cp, [("training_job_delete", {"jobName": "fsx-train"})])
    until(lambda: not core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by=instantstart")
          .items, "the job's pods gone")
    assert gone is not None


def test_model_into_fsx_then_served_from_it(shared_cp: Running, twin_process: TwinProcess, tmp_path: Any) -> None:
    core = kube(twin_process, tmp_path, TAG)
    with shared_cp.client() as client:
        status = client.get("/api/v1/models/status", params={"modelId": MODEL, "fsxStorage": "shared"}).json()
        assert status["state"] == "ABSENT" and status["storage"] == "shared", status
        view = _ok(client, "/api/v1/models/download", {"modelId": MODEL, "fsxStorage": "shared"})
        result = view["stages"][0]["outputs"]
        assert result["alreadyPresent"] is False and result["files"] == 4 and result["totalBytes"] > 0, result
        assert result["mountPath"] == MODEL_PATH and result["fsxClaim"] == "shared"
        assert view["params"]["storageType"] == "fsx" and view["params"]["claim"] == "shared"
        status = client.get("/api/v1/models/status", params={"modelId": MODEL, "fsxStorage": "shared"}).json()
        assert status["state"] == "COMPLETE" and status["totalBytes"] == result["totalBytes"], status
        job = k8s.BatchV1Api(core.api_client).read_namespaced_job(view["params"]["jobName"], "default")
        assert job.spec.template.spec.volumes[0].persistent_volume_claim.claim_name == "shared"
        logs = core.read_namespaced_pod_log(core.list_namespaced_pod(
            "default", label_selector=f"job-name={job.metadata.name}").items[0].metadata.name, "default")
        assert 'progress {"files": 4, "filesTotal": 4' in logs and "done 4 files" in logs
        # A second download finds the manifest on the file system and copies nothing.
        k8s.BatchV1Api(core.api_client).delete_namespaced_job(job.metadata.name, "default",
                                                              propagation_policy="Foreground", _preload_content=False)
        until(lambda: not k8s.BatchV1Api(core.api_client).list_namespaced_job("default").items, "the Job gone")
        again = _ok(client, "/api/v1/models/download", {"modelId": MODEL, "fsxStorage": "shared"})
        assert again["stages"][0]["outputs"]["alreadyPresent"] is True

    # A server pointed at a directory with no model cannot start (the FSx path holds no config.json).
    [bad] = mcp_calls(shared_cp, [("inference_deploy_container", {
        "deploymentCommand": "vllm serve /fsx/models/absent/main", "gpuCount": 1, "fsxClaim": "shared",
        "deploymentName": "absent", "serviceType": "clusterip"})])
    failed = mcp_wait(shared_cp, bad["operationId"])
    assert failed["status"] == "FAILED" and "CrashLoopBackOff" in failed["error"]["message"], failed
    pod = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=absent").items[0]
    assert "no config.json in that local directory" in core.read_namespaced_pod_log(pod.metadata.name, "default")
    [undeploy] = mcp_calls(shared_cp, [("inference_undeploy", {"deploymentName": "absent"})])
    assert mcp_wait(shared_cp, undeploy["operationId"])["status"] == "SUCCEEDED"
    until(lambda: not core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=absent").items,
          "the failed server gone")

    # The downloaded model is served from /fsx (mounted read-only).
    [ref] = mcp_calls(shared_cp, [("inference_deploy_container", {
        "deploymentCommand": f"vllm serve {MODEL_PATH} --max-model-len 1280", "gpuCount": 1, "fsxClaim": "shared",
        "deploymentName": "tiny", "serviceType": "clusterip"})])
    view = mcp_wait(shared_cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    pod = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=tiny").items[0]
    fsx = next(v for v in pod.spec.volumes if v.name == "fsx")
    assert fsx.persistent_volume_claim.claim_name == "shared" and fsx.persistent_volume_claim.read_only
    assert next(m for m in pod.spec.containers[0].volume_mounts if m.name == "fsx").mount_path == "/fsx"
    answer = mcp_calls(shared_cp, [("inference_call_model", {"service_name": "tiny", "prompt": "hello",
                                                                 "max_tokens": 16})])[0]
    assert "simulated" in str(answer)
    [undeploy] = mcp_calls(shared_cp, [("inference_undeploy", {"deploymentName": "tiny"})])
    assert mcp_wait(shared_cp, undeploy["operationId"])["status"] == "SUCCEEDED"
    until(lambda: not core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=tiny").items,
          "the server gone (its GPU free)")


def _fsx_volume(template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod template's FSx volume and its container's mount of it."""
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == "fsx")
    mount = next(m for m in template["spec"]["containers"][0]["volumeMounts"] if m["name"] == "fsx")
    return volume, mount


def test_recipes_and_ray_jobs_mount_fsx(shared_cp: Running, twin_process: TwinProcess, tmp_path: Any) -> None:
    core = kube(twin_process, tmp_path, TAG)
    custom = k8s.CustomObjectsApi(core.api_client)
    paths = {"script": "/fsx/code/train.py", "outputDir": "/fsx/out"}
    pytorch = {"recipe": "pytorch", "jobName": "fsx-recipe", "instanceType": "ml.g6.4xlarge", "fields": paths}
    verl = {"recipe": "verl", "jobName": "fsx-rl", "instanceType": "ml.g6.4xlarge",
            "fields": {"trainFiles": "/fsx/data/train.parquet", "valFiles": "/fsx/data/test.parquet"}}
    unset, ray_unset, outside = (r for r in mcp_raw(shared_cp, [
        ("training_recipe_submit", pytorch),
        ("training_recipe_submit", verl),
        ("training_recipe_submit", {**pytorch, "fields": {"script": "/data/train.py"}}),
    ])[:3])
    for result, field in ((unset, "command"), (ray_unset, "entrypoint")):
        error = _error(result)
        assert error["code"] == "INVALID_INPUT" and f"{field}: uses /fsx, but fsxClaim is not set" in error["message"]
    assert "'/data/train.py' is not under /s3 or /fsx" in _error(outside)["message"]

    # A recipe whose paths lie under /fsx: a HyperPodPyTorchJob with the claim at /fsx (read-write).
    [ref] = mcp_calls(shared_cp, [("training_recipe_submit", {**pytorch, "fsxClaim": "shared"})])
    assert mcp_wait(shared_cp, ref["operationId"])["status"] == "SUCCEEDED"
    job = custom.get_namespaced_custom_object(training.GROUP, training.VERSION, "default", training.PLURAL,
                                              "fsx-recipe")
    replica = job["spec"]["replicaSpecs"][0]["template"]
    volume, mount = _fsx_volume(replica)
    assert volume["persistentVolumeClaim"] == {"claimName": "shared"} and mount == {"name": "fsx", "mountPath": "/fsx"}
    assert replica["spec"]["containers"][0]["command"][-5:-3] == ["/fsx/code/train.py", "--output-dir"]
    [gone] = mcp_calls(shared_cp, [("training_job_delete", {"jobName": "fsx-recipe"})])
    assert gone is not None
    until(lambda: not core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by=instantstart")
          .items, "the recipe's pods gone")

    # The KubeRay recipe: head and workers mount the claim at /fsx and run.
    [rl] = mcp_calls(shared_cp, [("training_recipe_submit", {**verl, "fsxClaim": "shared"})])
    assert mcp_wait(shared_cp, rl["operationId"])["status"] == "SUCCEEDED"
    body = custom.get_namespaced_custom_object(ray_job.GROUP, ray_job.VERSION, "default", ray_job.PLURAL, "fsx-rl")
    cluster = body["spec"]["rayClusterSpec"]
    for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
        volume, mount = _fsx_volume(template)
        assert volume["persistentVolumeClaim"]["claimName"] == "shared" and mount["mountPath"] == "/fsx"
    until(lambda: [p for p in core.list_namespaced_pod("default").items if "fsx-rl" in p.metadata.name
                   and p.status.phase in ("Running", "Succeeded")], "the Ray pods running on the FSx mount")
    [gone] = mcp_calls(shared_cp, [("training_job_delete", {"jobName": "fsx-rl"})])
    assert gone is not None
