"""Controller-level scenarios for operators and stateful workloads: training, inference, sets, volumes."""

from __future__ import annotations

import json
from typing import Any

from hyperpod_twin.sim.nodes import NodeController
from hyperpod_twin.sim.plugin import install_crds
from tests.support.sim import SimCluster, hpjob, pod_spec, pytorchjob


def _true(obj: dict[str, Any]) -> set[str]:
    return {c["type"] for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"}


def test_training_job_waits_for_crd_then_runs_with_rank_env_and_succeeds(cluster: SimCluster) -> None:
    assert cluster.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs") is None
    install_crds(cluster.sim, "training-operator")
    crd = cluster.get(
        "apiextensions.k8s.io", "customresourcedefinitions", "hyperpodpytorchjobs.sagemaker.amazonaws.com", ""
    )
    assert "Established" in _true(crd)
    cluster.add_node("i-01111111111111111")
    cluster.add_node("i-01111111111111112")
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", hpjob("llama", 2))
    cluster.advance(4)
    pods = sorted(cluster.list("", "pods", "default"), key=lambda p: p["metadata"]["name"])
    assert [p["metadata"]["name"] for p in pods] == ["llama-pod-0", "llama-pod-1"]
    assert {p["spec"]["nodeName"] for p in pods} == {"hyperpod-i-01111111111111111", "hyperpod-i-01111111111111112"}
    env = {e["name"]: e["value"] for e in pods[1]["spec"]["containers"][0]["env"]}
    assert env["NNODES"] == "2" and env["NPROC_PER_NODE"] == "4" and env["NODE_RANK"] == "1"
    assert env["WORLD_SIZE"] == "8" and env["MASTER_ADDR"] == "llama-pod-0"
    assert pods[0]["metadata"]["labels"]["HPJob"] == "llama"
    job = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "llama")
    assert _true(job) == {"Created", "Running"}
    cluster.advance(20)
    job = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "llama")
    assert _true(job) == {"Created", "Completed"}
    lines = [ln.text for ln in cluster.sim.runtime.logs.read("default", "llama-pod-0", "pytorch-job-container")]
    assert any(line.startswith("step 5/5") for line in lines) and lines[-1] == "[twin] exited with code 0"


def test_training_job_restarts_after_node_loss_then_fails_when_retries_run_out(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    cluster.add_node("i-02222222222222221")
    cluster.add_node("i-02222222222222222")
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", hpjob("resilient", 1, jobMaxRetryCount=1))
    cluster.advance(4)
    node = cluster.get("", "pods", "resilient-pod-0")["spec"]["nodeName"]
    nodes: NodeController = cluster.sim.controller(NodeController)
    cluster.sim.run(lambda: nodes.instance_removed(node.removeprefix("hyperpod-")))
    job = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "resilient")
    assert job["status"]["restartCount"] == 1 and "Restarting" in _true(job)
    cluster.advance(4)
    pod = cluster.get("", "pods", "resilient-pod-0")
    assert pod["spec"]["nodeName"] != node and pod["status"]["phase"] == "Running"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["JOB_RESTART_COUNT"] == "1"
    # The second loss exhausts jobMaxRetryCount=1.
    cluster.sim.run(lambda: nodes.instance_removed(pod["spec"]["nodeName"].removeprefix("hyperpod-")))
    job = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "resilient")
    assert "Failed" in _true(job)


def test_training_job_failing_attempt_is_retried(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    cluster.add_node("i-03333333333333331")
    job = hpjob("flaky", 1, jobMaxRetryCount=3)
    job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"]["twin.instantstart.io/fail-attempts"] = "1"
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", job)
    cluster.advance(30)
    current = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "flaky")
    assert current["status"]["restartCount"] == 1 and "Completed" not in _true(current)
    cluster.advance(30)
    current = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "flaky")
    assert "Completed" in _true(current) and current["status"]["restartCount"] == 1


def test_training_pod_failure_restarts_only_that_pod_within_the_budget(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    cluster.add_node("i-03333333333333341")
    cluster.add_node("i-03333333333333342")
    job = hpjob(
        "partial", 2, jobMaxRetryCount=3, restartPolicy={"numRestartBeforeFullJobRestart": 1, "evalPeriodSeconds": 3600}
    )
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", job)
    cluster.advance(4)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.list("", "pods", "default")}
    nodes: NodeController = cluster.sim.controller(NodeController)
    victim = cluster.get("", "pods", "partial-pod-1")["spec"]["nodeName"]
    cluster.add_node("i-03333333333333343")  # spare capacity for the replacement
    cluster.sim.run(lambda: nodes.instance_removed(victim.removeprefix("hyperpod-")))
    cluster.advance(4)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.list("", "pods", "default")}
    assert after["partial-pod-0"] == uids["partial-pod-0"]  # the healthy pod kept running
    assert after["partial-pod-1"] != uids["partial-pod-1"]
    current = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "partial")
    assert current["status"]["restartCount"] == 1 and "Running" in _true(current)
    restarts = [e["message"] for e in cluster.list("", "events", "default") if e["reason"] == "JobRestarting"]
    assert restarts == ["Restarting (pod) after failure of partial-pod-1"]
    # The next failure exceeds the pod-level budget: the whole job restarts.
    victim = cluster.get("", "pods", "partial-pod-0")["spec"]["nodeName"]
    cluster.sim.run(lambda: nodes.instance_removed(victim.removeprefix("hyperpod-")))
    current = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "partial")
    restarting = next(c for c in current["status"]["conditions"] if c["type"] == "Restarting")
    assert current["status"]["restartCount"] == 2 and restarting["message"].startswith("job-level restart")
    assert current["status"]["restartStatus"]["fullJobRestartCount"] == 1


def test_inference_endpoint_serves_a_simulated_vllm(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "inference-operator")
    cluster.add_node("i-04444444444444441")
    cluster.create(
        "inference.sagemaker.aws.amazon.com",
        "inferenceendpointconfigs",
        {
            "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
            "kind": "InferenceEndpointConfig",
            "metadata": {"name": "qwen", "namespace": "default"},
            "spec": {
                "modelName": "qwen",
                "instanceType": "ml.g5.12xlarge",
                "modelSourceConfig": {
                    "modelSourceType": "s3",
                    "s3Storage": {"bucketName": "models", "region": "us-west-2"},
                },
                "worker": {
                    "image": "vllm/vllm-openai:v0.9.0",
                    "args": ["--model", "/opt/ml/model", "--served-model-name", "qwen3-8b", "--port", "8000"],
                    "modelInvocationPort": {"containerPort": 8000},
                    "modelVolumeMount": {"name": "model-weights"},
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                },
            },
        },
    )
    cluster.advance(1)
    iec = cluster.get("inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs", "qwen")
    assert iec["status"]["state"] == "DeploymentInProgress"
    cluster.advance(5)
    iec = cluster.get("inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs", "qwen")
    assert iec["status"]["state"] == "DeploymentComplete"
    svc = cluster.get("", "services", "qwen")
    assert svc["spec"]["ports"][0]["port"] == 8000
    pod = cluster.list("", "pods", "default")[0]
    handler = cluster.sim.runtime.pod_http.lookup("default", pod["metadata"]["name"], 8000)
    assert handler is not None
    models = json.loads(handler("GET", "/v1/models", "", {}, b"").body)
    assert models["data"][0]["id"] == "qwen3-8b"
    body = json.dumps({"model": "qwen3-8b", "messages": [{"role": "user", "content": "hi there"}]}).encode()
    answer = json.loads(handler("POST", "/v1/chat/completions", "", {}, body).body)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"].startswith("[twin simulated response]")
    assert "hi there" in answer["choices"][0]["message"]["content"]
    assert handler("POST", "/v1/chat/completions", "", {}, b'{"model": "other", "messages": []}').status == 404


def test_daemonset_runs_on_every_admitting_node(cluster: SimCluster) -> None:
    cluster.add_node("i-05555555555555551")
    cluster.add_node("i-05555555555555552", "ml.m5.xlarge", group="cpu")
    labels = {"app": "nvidia-device-plugin"}
    cluster.create(
        "apps",
        "daemonsets",
        {
            "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": pod_spec(0, nodeSelector={"sagemaker.amazonaws.com/compute-type": "hyperpod"}),
                },
            },
        },
    )
    cluster.advance(4)
    ds = cluster.get("apps", "daemonsets", "nvidia-device-plugin", "kube-system")
    assert ds["status"]["desiredNumberScheduled"] == 2 and ds["status"]["numberReady"] == 2
    cluster.add_node("i-05555555555555553")
    cluster.advance(4)
    ds = cluster.get("apps", "daemonsets", "nvidia-device-plugin", "kube-system")
    assert ds["status"]["numberReady"] == 3
    # An unhealthy node is tainted: a daemon without the toleration leaves it.
    nodes: NodeController = cluster.sim.controller(NodeController)
    cluster.sim.run(lambda: nodes.health_finding("i-05555555555555553", "UnschedulablePendingReplacement"))
    ds = cluster.get("apps", "daemonsets", "nvidia-device-plugin", "kube-system")
    assert ds["status"]["desiredNumberScheduled"] == 2


def test_statefulset_with_claims_binds_static_volumes(cluster: SimCluster) -> None:
    cluster.add_node("i-06666666666666661")
    for i in range(2):
        cluster.create(
            "",
            "persistentvolumes",
            {
                "metadata": {"name": f"static-pv-{i}"},
                "spec": {
                    "capacity": {"storage": "1200Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "csi": {"driver": "efs.csi.aws.com", "volumeHandle": f"fs-0123456789abcdef{i}"},
                },
            },
        )
    labels = {"app": "db"}
    cluster.create(
        "apps",
        "statefulsets",
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "serviceName": "db",
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec()},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteMany"],
                            "storageClassName": "",
                            "resources": {"requests": {"storage": "100Gi"}},
                        },
                    }
                ],
            },
        },
    )
    cluster.advance(1)
    assert [p["metadata"]["name"] for p in cluster.list("", "pods", "default")] == ["db-0"]  # ordered
    cluster.advance(8)
    assert [p["metadata"]["name"] for p in cluster.list("", "pods", "default")] == ["db-0", "db-1"]
    claims = cluster.list("", "persistentvolumeclaims", "default")
    assert [c["status"]["phase"] for c in claims] == ["Bound", "Bound"]
    assert {c["spec"]["volumeName"] for c in claims} == {"static-pv-0", "static-pv-1"}
    sts = cluster.get("apps", "statefulsets", "db")
    assert sts["status"]["readyReplicas"] == 2


def test_s3_claim_binds_by_volume_name_and_unbound_claims_block_pods(cluster: SimCluster) -> None:
    cluster.add_node("i-07777777777777771")
    cluster.create(
        "",
        "persistentvolumeclaims",
        {
            "metadata": {"name": "s3-claim"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": "s3-pv",
                "resources": {"requests": {"storage": "1200Gi"}},
            },
        },
    )
    pod = pod_spec(0, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "s3-claim"}}])
    cluster.create("", "pods", {"metadata": {"name": "reader"}, "spec": pod})
    cluster.advance(1)
    reader = cluster.get("", "pods", "reader")
    message = next(c for c in reader["status"]["conditions"] if c["type"] == "PodScheduled")["message"]
    assert "unbound immediate PersistentVolumeClaims" in message
    cluster.create(
        "",
        "persistentvolumes",
        {
            "metadata": {"name": "s3-pv"},
            "spec": {
                "capacity": {"storage": "1200Gi"},
                "accessModes": ["ReadWriteMany"],
                "mountOptions": ["allow-delete", "region us-west-2"],
                "csi": {
                    "driver": "s3.csi.aws.com",
                    "volumeHandle": "s3-csi-driver-volume",
                    "volumeAttributes": {"bucketName": "data"},
                },
            },
        },
    )
    cluster.advance(4)
    assert cluster.get("", "persistentvolumeclaims", "s3-claim")["status"]["phase"] == "Bound"
    assert cluster.get("", "pods", "reader")["status"]["phase"] == "Running"


def _chart_crd(cluster: SimCluster, relative: str) -> None:
    """Install a CRD the way helm does for a chart's crds/ directory (from the twin's chart repository)."""
    import pathlib

    import yaml

    import hyperpod_twin

    path = pathlib.Path(hyperpod_twin.__file__).parent / "charts" / relative
    cluster.create("apiextensions.k8s.io", "customresourcedefinitions", yaml.safe_load(path.read_text()))


def test_kubeflow_pytorchjob_from_the_dependencies_chart(cluster: SimCluster) -> None:
    _chart_crd(cluster, "hyperpod-dependencies/crds/kubeflow.org_pytorchjobs.yaml")
    cluster.add_node("i-0abababababababa1")
    cluster.create("kubeflow.org", "pytorchjobs", pytorchjob("mnist", 2))
    cluster.advance(4)
    pods = {p["metadata"]["name"]: p for p in cluster.list("", "pods", "default")}
    assert set(pods) == {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}
    env = {e["name"]: e["value"] for e in pods["mnist-worker-1"]["spec"]["containers"][0]["env"]}
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3" and env["MASTER_ADDR"] == "mnist-master-0"
    assert env["PET_NNODES"] == "3" and env["MASTER_PORT"] == "23456"
    assert cluster.get("", "services", "mnist-master-0")["spec"]["clusterIP"] == "None"
    job = cluster.get("kubeflow.org", "pytorchjobs", "mnist")
    assert _true(job) == {"Created", "Running"} and job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    cluster.advance(12)
    job = cluster.get("kubeflow.org", "pytorchjobs", "mnist")
    assert "Succeeded" in _true(job) and job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1


def test_kubeflow_pytorchjob_auto_resume_after_node_loss(cluster: SimCluster) -> None:
    _chart_crd(cluster, "hyperpod-dependencies/crds/kubeflow.org_pytorchjobs.yaml")
    cluster.add_node("i-0abababababababb1")
    cluster.add_node("i-0abababababababb2")
    annotations = {
        "annotations": {
            "sagemaker.amazonaws.com/enable-job-auto-resume": "true",
            "sagemaker.amazonaws.com/job-max-retry-count": "1",
        }
    }
    job = pytorchjob("resume", 1, **annotations)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    cluster.create("kubeflow.org", "pytorchjobs", job)
    cluster.advance(4)
    node = cluster.get("", "pods", "resume-worker-0")["spec"]["nodeName"]
    nodes: NodeController = cluster.sim.controller(NodeController)
    cluster.add_node("i-0abababababababb3")
    cluster.sim.run(lambda: nodes.instance_removed(node.removeprefix("hyperpod-")))
    current = cluster.get("kubeflow.org", "pytorchjobs", "resume")
    assert current["status"]["restartCount"] == 1 and "Restarting" in _true(current)
    cluster.advance(50)  # the restarted pods wait for the old ones to finish their 30 s grace period
    assert "Succeeded" in _true(cluster.get("kubeflow.org", "pytorchjobs", "resume"))


def test_training_job_deadline_and_ttl(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "training-operator")
    cluster.add_node("i-0adadadadadadad1")
    job = hpjob("slow", 1, activeDeadlineSeconds=30, ttlSecondsAfterFinished=60)
    job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"]["twin.instantstart.io/run-seconds"] = "1000"
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", job)
    cluster.advance(10)
    assert "Running" in _true(cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "slow"))
    cluster.advance(30)
    current = cluster.get("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "slow")
    failed = next(c for c in current["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "DeadlineExceeded"
    assert cluster.list("", "pods", "default") == []
    cluster.advance(61)
    assert cluster.list("sagemaker.amazonaws.com", "hyperpodpytorchjobs", "default") == []


def test_daemonset_reconciles_the_node_that_changed(cluster: SimCluster) -> None:
    """Per-node reconciles (a Node or a daemon pod event) keep one pod per node and the status counts; a new
    generation of the DaemonSet still reconciles it over every node."""
    cluster.add_node("i-07777777777777771")
    cluster.add_node("i-07777777777777772")
    labels = {"app": "agent"}
    cluster.create(
        "apps",
        "daemonsets",
        {
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec(0)},
            },
        },
    )
    cluster.advance(4)

    def daemon_pods() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for pod in cluster.list("", "pods", "kube-system"):
            if pod["metadata"]["name"].startswith("agent-") and not pod["metadata"].get("deletionTimestamp"):
                found.setdefault(pod["spec"].get("nodeName", ""), []).append(pod["metadata"]["name"])
        return found

    first = daemon_pods()
    assert sorted(first) == ["hyperpod-i-07777777777777771", "hyperpod-i-07777777777777772"]
    assert all(len(names) == 1 for names in first.values())
    # A daemon pod removed behind the controller's back is replaced on its node (a pod event, one node).
    gone = first["hyperpod-i-07777777777777771"][0]
    pods = cluster.store.find_type("", "pods")
    assert pods is not None
    cluster.store.delete(pods, "kube-system", gone)
    cluster.advance(4)
    again = daemon_pods()
    assert len(again["hyperpod-i-07777777777777771"]) == 1 and again["hyperpod-i-07777777777777771"][0] != gone
    assert again["hyperpod-i-07777777777777772"] == first["hyperpod-i-07777777777777772"]
    ds = cluster.get("apps", "daemonsets", "agent", "kube-system")
    assert ds["status"]["currentNumberScheduled"] == 2 and ds["status"]["numberReady"] == 2
    # A third node gets its pod; a deleted node drops out of the counts (Node events, one node each).
    cluster.add_node("i-07777777777777773")
    cluster.advance(4)
    assert len(daemon_pods()) == 3
    assert cluster.get("apps", "daemonsets", "agent", "kube-system")["status"]["numberReady"] == 3
    nodes = cluster.store.find_type("", "nodes")
    assert nodes is not None
    cluster.store.delete(nodes, "", "hyperpod-i-07777777777777772")
    cluster.advance(4)
    ds = cluster.get("apps", "daemonsets", "agent", "kube-system")
    assert ds["status"]["desiredNumberScheduled"] == 2 and ds["status"]["currentNumberScheduled"] == 2
    # A new generation (a node selector no node matches) reconciles every node: the pods go.
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"example.com/none": "true"}
    ds["metadata"].pop("resourceVersion", None)
    cluster.store.update(cluster.store.find_type("apps", "daemonsets"), ds)  # type: ignore[arg-type]
    cluster.advance(4)
    ds = cluster.get("apps", "daemonsets", "agent", "kube-system")
    assert ds["status"]["observedGeneration"] == 2
    assert ds["status"]["desiredNumberScheduled"] == 0 and ds["status"]["currentNumberScheduled"] == 0
