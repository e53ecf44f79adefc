"""Training on one control-plane process and one cluster (module scope): kill -9 during a training submit leaves
one HyperPodPyTorchJob, not two, and the operation completes after the restart; MLflow through MCP: a job with
`mlflow` is refused until mlflow_configure made the tracking server (tagged, its writer role limited to it, bound to
the pods' service account), then its run and loss per step come back from the twin's real `mlflow server` in
training_history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from instantstart.manifests.iam_policies import lifecycle_deny
from instantstart.twin_process import TwinProcess
from tests.support.crash import ControlPlane, on_fresh_twin
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal

TAG = "trmlf"
EKS = f"eks-cluster-{TAG}"
JOB = {"jobName": "once", "image": "example/train:1", "command": "train.py --epochs 1",
       "instanceType": "ml.g6.4xlarge"}


@pytest.fixture(scope="module")
def plane(twin_process: TwinProcess) -> Iterator[ControlPlane]:
    """One control-plane process (a crash test restarts it) and one HyperPod cluster with the training operator."""
    cp = on_fresh_twin(twin_process, "training-mlflow-")
    patch = pytest.MonkeyPatch()
    for key, value in twin_process.env.items():  # this process's clients (kube(), twin_client) on the twin
        patch.setenv(key, value)
    with cp.start().client() as client:
        make_hyperpod(client, TAG)
        ref = client.post("/api/v1/capacity/advanced-features", json={"trainingOperator": {"enabled": True},
                                                                      "kuberayOperator": {"enabled": True}})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    try:
        yield cp
    finally:
        cp.stop()
        patch.undo()


def hold(twin: TwinProcess, held: bool) -> None:
    """Hold (or release) the replies to HyperPodPyTorchJob writes on the cluster's API server."""
    httpx.post(f"{twin.endpoint_url}/_twin/kube/{EKS}/writes/hold",
               json={"resource": "hyperpodpytorchjobs", "held": held}, timeout=30).raise_for_status()


def pytorch_jobs(objects: k8s.CustomObjectsApi) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = objects.list_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs")["items"]
    return items


def ended(client: httpx.Client, name: str) -> dict[str, Any] | None:
    """job_get_status through REST once the job is Completed or Failed."""
    status: dict[str, Any] = client.get("/api/v1/training/jobs/status", params={"jobName": name}).json()
    return status if status["job"]["state"] in ("Completed", "Failed") else None


def test_kill_9_during_submit_leaves_one_job(plane: ControlPlane, twin_process: TwinProcess, tmp_path: Path) -> None:
    twin = twin_process
    objects = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)
    running = plane.ensure_running()
    # The job's write lands in the API server but its reply is held: the control plane is killed while its
    # apply stage waits for an answer it will never get.
    hold(twin, True)
    try:
        with running.client() as client:
            ref = client.post("/api/v1/training/jobs", json=JOB)
            assert ref.status_code == 202, ref.text
            operation_id = ref.json()["operationId"]

            def moment() -> str | None:
                jobs = pytorch_jobs(objects)
                return f"{len(jobs)} job(s) written, reply held" if jobs else None

            killed = plane.kill_when(moment)
    finally:
        hold(twin, False)
    [before] = pytorch_jobs(objects)
    with plane.start().client() as client:
        view = wait_terminal(client, operation_id, timeout=300)
        assert view["status"] == "SUCCEEDED", (killed, view)
        [stage] = view["stages"]
        assert stage["name"] == "apply" and stage["attempts"] >= 2, f"the apply did not run again ({killed})"
        # A client that never got its answer submits again: refused, the job exists.
        again = client.post("/api/v1/training/jobs", json=JOB)
        assert again.status_code == 409, again.text
        assert "once already exists" in again.json()["error"]["message"]
        [after] = pytorch_jobs(objects)
        assert after["metadata"]["uid"] == before["metadata"]["uid"]  # re-applied, not re-created
        done = until(lambda: ended(client, "once"), what="the job ends", timeout=180, every=0.5)
    assert done["job"]["state"] == "Completed", done
    assert len(pytorch_jobs(objects)) == 1


def test_mlflow_configure_job_run_and_history(plane: ControlPlane, twin_process: TwinProcess, tmp_path: Path) -> None:
    twin = twin_process
    cp = plane.ensure_running()
    tracked = {**JOB, "jobName": "tracked", "mlflow": {"experiment": "exp-a"}}
    recipe = {"recipe": "pytorch", "jobName": "tracked-r", "instanceType": "ml.g6.4xlarge",
              "mlflow": {"experiment": "exp-a"}}
    refused = mcp_raw(cp, [("training_job_submit", tracked), ("training_recipe_submit", recipe),
                           ("training_history", {})])
    for result in refused[:3]:
        assert result["isError"], result
        error = result["payload"]["error"]
        assert error["code"] == "PRECONDITION_FAILED" and "mlflow_configure" in error["hint"], error
        assert f"MLflow is not configured for cluster {TAG}" in error["message"]

    [ref] = mcp_calls(cp, [("mlflow_configure", {})])
    view = mcp_wait(cp, ref["operationId"], limit=400)
    assert view["status"] == "SUCCEEDED", view
    result = view["result"]
    name = f"instantstart-{TAG}"
    sm: Any = twin_client(twin, "sagemaker")
    server = sm.describe_mlflow_tracking_server(TrackingServerName=name)
    assert server["TrackingServerStatus"] == "Created"
    assert result["trackingServerArn"] == server["TrackingServerArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=server["TrackingServerArn"])["Tags"]}
    assert tags["instantstart:cluster-tag"] == TAG and tags["instantstart:installation"].startswith("is-")
    assert server["ArtifactStoreUri"].endswith(f"/{TAG}/mlflow/")
    # The writer role may use this tracking server only, and is the pods' service account's identity.
    iam: Any = twin_client(twin, "iam")
    role = f"instantstart-{TAG}-mlflow-writer"
    [policy_name] = iam.list_role_policies(RoleName=role)["PolicyNames"]
    document = iam.get_role_policy(RoleName=role, PolicyName=policy_name)["PolicyDocument"]
    allows = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    assert {r for s in allows for r in s["Resource"]} == {server["TrackingServerArn"]}
    assert {a for s in allows for a in s["Action"]} == {
        "sagemaker-mlflow:*", "sagemaker:DescribeMlflowTrackingServer"}
    assert document["Statement"][-1] == lifecycle_deny(), document
    eks: Any = twin_client(twin, "eks")
    [association] = [a for a in eks.list_pod_identity_associations(clusterName=EKS)["associations"]
                     if a["serviceAccount"] == "instantstart-training"]
    assert association["namespace"] == "default"
    assert eks.describe_pod_identity_association(
        clusterName=EKS, associationId=association["associationId"])["association"]["roleArn"].endswith(role)

    # What it created is in the ledger: cluster deletion removes the server and both roles, after HyperPod.
    with cp.client() as client:
        plan = client.get(f"/api/v1/clusters/{TAG}/deletion-plan").json()
    planned = [(r["resourceType"], r["resourceId"]) for r in plan["resources"]]
    assert ("sagemaker:mlflow-tracking-server", name) in planned
    assert {("iam:role", f"instantstart-{TAG}-mlflow-server"), ("iam:role", role)} <= set(planned)
    assert planned.index(("sagemaker:mlflow-tracking-server", name)) < planned.index(("iam:role", role))

    [job] = mcp_calls(cp, [("training_job_submit", tracked)])
    assert mcp_wait(cp, job["operationId"])["status"] == "SUCCEEDED"
    objects = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)
    body = objects.get_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs",
                                                "tracked")
    pod = body["spec"]["replicaSpecs"][0]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["MLFLOW_TRACKING_URI"] == server["TrackingServerArn"]  # the sagemaker-mlflow plugin's URI
    assert env["MLFLOW_EXPERIMENT_NAME"] == "exp-a" and env["MLFLOW_RUN_NAME"] == "tracked"
    assert pod["serviceAccountName"] == "instantstart-training"
    with cp.client() as client:
        done = until(lambda: ended(client, "tracked"), what="the tracked job ends", timeout=180, every=0.5)
    assert done["job"]["state"] == "Completed", done

    def history() -> dict[str, Any] | None:
        # The pod logs on real time while the twin clock runs fast: the experiment may not exist yet (NOT_FOUND).
        [result] = mcp_raw(cp, [("training_history", {"experiment": "exp-a", "jobName": "tracked"})])[:1]
        if result["isError"]:
            assert result["payload"]["error"]["code"] == "NOT_FOUND", result
            return None
        answer: dict[str, Any] = result["payload"]
        return answer if answer["runs"] and answer["runs"][0]["status"] == "FINISHED" else None

    answer = until(history, what="the run in training_history", timeout=120, every=1)
    [run] = answer["runs"]
    assert answer["trackingServerName"] == name and run["jobName"] == "tracked" and run["runName"] == "tracked"
    assert run["metrics"] == {"loss": 0.5}
    assert [(p["step"], p["value"]) for p in run["history"]["loss"]] == [
        (1, 2.5), (2, 1.25), (3, 0.833), (4, 0.625), (5, 0.5)]

    # The KubeRay path: the head (where the driver runs) and the workers get the same identity and variables;
    # the run is found by the job's name.
    [ray] = mcp_calls(cp, [("ray_job_submit", {"jobName": "ray-tracked", "image": "example/ray:1",
                                               "instanceType": "ml.g6.4xlarge", "entrypoint": "python3 rl.py",
                                               "mlflow": {"experiment": "exp-ray"}})])
    assert mcp_wait(cp, ray["operationId"])["status"] == "SUCCEEDED"
    rayjob = objects.get_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", "ray-tracked")
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["serviceAccountName"] == "instantstart-training"
    assert {e["name"]: e["value"] for e in head["containers"][0]["env"]}["MLFLOW_TRACKING_URI"] == (
        server["TrackingServerArn"])

    def ray_history() -> dict[str, Any] | None:
        [found] = mcp_calls(cp, [("training_history", {"jobName": "ray-tracked"})])
        return found if found["runs"] and found["runs"][0]["status"] == "FINISHED" else None

    [ray_run] = until(ray_history, what="the Ray job's run", timeout=120, every=1)["runs"]
    assert ray_run["jobName"] == "ray-tracked" and ray_run["metrics"] == {"loss": 0.5}

    missing = mcp_raw(cp, [("training_history", {"experiment": "nope"})])[0]
    assert missing["isError"] and missing["payload"]["error"]["code"] == "NOT_FOUND"
    assert "exp-a" in missing["payload"]["error"]["hint"]


def test_a_tracking_server_made_elsewhere_is_attached_only_with_adopt(plane: ControlPlane,
                                                                       twin_process: TwinProcess) -> None:
    cp = plane.ensure_running()
    sm: Any = twin_client(twin_process, "sagemaker")
    sm.create_mlflow_tracking_server(TrackingServerName="theirs", ArtifactStoreUri="s3://their-bucket/mlflow",
                                     RoleArn="arn:aws:iam::123456789012:role/their-mlflow")
    refused = mcp_raw(cp, [("mlflow_configure", {"trackingServerName": "theirs"})])[0]
    assert refused["isError"], refused
    error = refused["payload"]["error"]
    assert error["code"] == "CONFLICT" and "did not create it" in error["message"], error
    assert '"adopt": true' in error["hint"] and error["details"]["field"] == "adopt", error
    [ref] = mcp_calls(cp, [("mlflow_configure", {"trackingServerName": "theirs", "adopt": True})])
    view = mcp_wait(cp, ref["operationId"], limit=400)
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["trackingServerName"] == "theirs" and view["result"]["created"] is False


def test_cluster_deletion_removes_the_tracking_server_and_its_roles(plane: ControlPlane,
                                                                    twin_process: TwinProcess) -> None:
    twin = twin_process
    cp = plane.ensure_running()
    sm: Any = twin_client(twin, "sagemaker")
    assert sm.describe_mlflow_tracking_server(TrackingServerName=f"instantstart-{TAG}")["TrackingServerStatus"] == (
        "Created"), "runs after test_mlflow_configure_job_run_and_history"
    with cp.client() as client:
        plan = client.get(f"/api/v1/clusters/{TAG}/deletion-plan").json()
        go = client.post(f"/api/v1/clusters/{TAG}/delete", json={"planDigest": plan["planDigest"]}).json()
        view = wait_terminal(client, go["operationId"], timeout=300)
        assert view["status"] == "SUCCEEDED", view
    servers = sm.list_mlflow_tracking_servers()["TrackingServerSummaries"]
    assert f"instantstart-{TAG}" not in [s["TrackingServerName"] for s in servers]
    assert "theirs" in [s["TrackingServerName"] for s in servers]  # adopted, never deleted
    iam: Any = twin_client(twin, "iam")
    roles = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(f"instantstart-{TAG}-")]
    assert roles == [], roles
