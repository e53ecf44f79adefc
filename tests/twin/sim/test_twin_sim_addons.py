"""Controller-level scenarios for chart/add-on operators: KEDA, cert-manager, KubeRay, Karpenter statuses."""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography import x509

from hyperpod_twin.sim.karpenter_calls import group_spec
from hyperpod_twin.sim.plugin import install_crds
from tests.support.sim import SERVE_CONFIG, SimCluster, head_template, pod_spec


def _true(obj: dict[str, Any]) -> set[str]:
    return {c["type"] for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"}


def test_keda_scales_the_target_between_min_and_max(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "keda")
    cluster.add_node("i-08888888888888881", "ml.m5.4xlarge", group="cpu")
    labels = {"app": "srv"}
    cluster.create(
        "apps",
        "deployments",
        {
            "metadata": {"name": "srv"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec()},
            },
        },
    )
    so = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "srv", "annotations": {"twin.instantstart.io/metric-value": "25"}},
        "spec": {
            "scaleTargetRef": {"name": "srv"},
            "minReplicaCount": 1,
            "maxReplicaCount": 4,
            "triggers": [
                {"type": "prometheus", "metadata": {"serverAddress": "http://prom", "query": "q", "threshold": "10"}}
            ],
        },
    }
    cluster.create("keda.sh", "scaledobjects", so)
    assert cluster.get("apps", "deployments", "srv")["spec"]["replicas"] == 3
    current = cluster.get("keda.sh", "scaledobjects", "srv")
    assert {"Ready", "Active"} <= _true(current) and current["status"]["hpaName"] == "keda-hpa-srv"
    rtype = cluster.store.find_type("keda.sh", "scaledobjects")
    assert rtype is not None
    for value, expected in (("1000", 4), ("0", 1)):
        current = cluster.get("keda.sh", "scaledobjects", "srv")
        current["metadata"]["annotations"]["twin.instantstart.io/metric-value"] = value
        cluster.store.update(rtype, current)
        assert cluster.get("apps", "deployments", "srv")["spec"]["replicas"] == expected
    cluster.advance(4)
    assert cluster.get("apps", "deployments", "srv")["status"]["readyReplicas"] == 1
    hpa = cluster.get("autoscaling", "horizontalpodautoscalers", "keda-hpa-srv")
    assert hpa["spec"]["maxReplicas"] == 4 and hpa["status"]["desiredReplicas"] == 1
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "ScaledObject"


def test_cert_manager_issues_a_real_tls_secret(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "cert-manager")
    cluster.create(
        "cert-manager.io",
        "certificates",
        {
            "metadata": {"name": "serving-cert"},
            "spec": {
                "secretName": "webhook-server-cert",
                "dnsNames": ["webhook.default.svc"],
                "issuerRef": {"name": "selfsigned-issuer"},
            },
        },
    )
    cert = cluster.get("cert-manager.io", "certificates", "serving-cert")
    assert "Ready" not in _true(cert)  # its Issuer does not exist yet
    cluster.create(
        "cert-manager.io", "issuers", {"metadata": {"name": "selfsigned-issuer"}, "spec": {"selfSigned": {}}}
    )
    assert "Ready" in _true(cluster.get("cert-manager.io", "issuers", "selfsigned-issuer"))
    cert = cluster.get("cert-manager.io", "certificates", "serving-cert")
    assert "Ready" in _true(cert) and cert["status"]["revision"] == 1
    secret = cluster.get("", "secrets", "webhook-server-cert")
    assert secret["type"] == "kubernetes.io/tls"
    parsed = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    san = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["webhook.default.svc"]


def test_ray_job_brings_up_a_cluster_runs_and_shuts_it_down(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "kuberay")
    cluster.add_node("i-09999999999999991")
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "verl", "annotations": {"twin.instantstart.io/run-seconds": "10"}},
        "spec": {
            "entrypoint": "python -m verl.trainer.main_ppo",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 5,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": head_template()},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 0,
                        "maxReplicas": 4,
                        "rayStartParams": {},
                        "template": head_template(1),
                    }
                ],
            },
        },
    }
    cluster.create("ray.io", "rayjobs", rayjob)
    job = cluster.get("ray.io", "rayjobs", "verl")
    assert job["status"]["jobDeploymentStatus"] == "Initializing"
    cname = job["status"]["rayClusterName"]
    cluster.advance(4)
    rc = cluster.get("ray.io", "rayclusters", cname)
    assert rc["status"]["state"] == "ready" and rc["status"]["availableWorkerReplicas"] == 2
    assert rc["status"]["desiredGPU"] == "2"
    assert cluster.get("", "services", f"{cname}-head-svc")["spec"]["ports"]
    job = cluster.get("ray.io", "rayjobs", "verl")
    assert job["status"]["jobDeploymentStatus"] == "Running" and job["status"]["jobStatus"] == "RUNNING"
    cluster.advance(15)
    job = cluster.get("ray.io", "rayjobs", "verl")
    assert job["status"]["jobStatus"] == "SUCCEEDED" and job["status"]["jobDeploymentStatus"] == "Complete"
    cluster.advance(6)
    assert cluster.list("ray.io", "rayclusters", "default") == []


def test_group_spec_round_trips_describe_cluster_fields() -> None:
    details = {
        "InstanceGroupName": "gpu",
        "InstanceType": "ml.g5.12xlarge",
        "CurrentCount": 1,
        "TargetCount": 1,
        "ExecutionRole": "arn:aws:iam::111122223333:role/exec",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-b/", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 1,
        "Status": "InService",
        "KubernetesConfig": {"CurrentLabels": {"a": "b"}, "DesiredLabels": {"a": "b"}, "DesiredTaints": []},
    }
    spec = group_spec(details, 3)
    assert spec["InstanceCount"] == 3 and "Status" not in spec and "CurrentCount" not in spec
    assert spec["KubernetesConfig"] == {"Labels": {"a": "b"}, "Taints": []}


def test_ray_service_serves_its_applications(cluster: SimCluster) -> None:
    import pathlib

    import yaml

    import hyperpod_twin

    for crd in ("ray.io_rayclusters.yaml", "ray.io_rayservices.yaml"):
        path = pathlib.Path(hyperpod_twin.__file__).parent / "charts" / "kuberay-operator" / "crds" / crd
        cluster.create("apiextensions.k8s.io", "customresourcedefinitions", yaml.safe_load(path.read_text()))
    cluster.add_node("i-0acacacacacacac1")
    cluster.create(
        "ray.io",
        "rayservices",
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "serve"},
            "spec": {
                "serveConfigV2": SERVE_CONFIG,
                "rayClusterConfig": {
                    "headGroupSpec": {"rayStartParams": {}, "template": head_template(1)},
                    "workerGroupSpecs": [],
                },
            },
        },
    )
    service = cluster.get("ray.io", "rayservices", "serve")
    assert service["status"]["conditions"][0]["status"] == "False"
    cluster.advance(4)
    service = cluster.get("ray.io", "rayservices", "serve")
    assert service["status"]["serviceStatus"] == "Running"
    apps = service["status"]["activeServiceStatus"]["applicationStatuses"]
    assert (
        apps["llm"]["status"] == "RUNNING"
        and apps["fruit"]["serveDeploymentStatuses"]["MangoStand"]["status"] == "HEALTHY"
    )
    svc = cluster.get("", "services", "serve-serve-svc")
    assert svc["spec"]["ports"][0]["port"] == 8000
    head = next(
        p for p in cluster.list("", "pods", "default") if p["metadata"]["labels"].get("ray.io/node-type") == "head"
    )
    handler = cluster.sim.runtime.pod_http.lookup("default", head["metadata"]["name"], 8000)
    assert handler is not None
    body = json.dumps({"model": "qwen-0.5b", "messages": [{"role": "user", "content": "hello ray"}]}).encode()
    answer = json.loads(handler("POST", "/v1/chat/completions", "", {}, body).body)
    assert answer["model"] == "qwen-0.5b" and "hello ray" in answer["choices"][0]["message"]["content"]
    fruit = json.loads(handler("GET", "/fruit/mango", "", {}, b"").body)
    assert fruit["application"] == "fruit" and fruit["result"].startswith("[twin simulated response]")


class _RecordingSageMaker:
    """Stands in for the SageMaker client Karpenter is given (the twin's boto3 factory in a Twin)."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls

    def update_cluster(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("update_cluster", kwargs))
        return {"ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc"}


def test_karpenter_respects_nodepool_limits(cluster: SimCluster) -> None:
    import time

    calls: list[tuple[str, dict[str, Any]]] = []
    cluster.sim.extra["boto3_client"] = lambda service: _RecordingSageMaker(calls)
    install_crds(cluster.sim, "karpenter")
    cluster.add_node("i-0karp00000000001", group="auto")
    group = {
        "InstanceGroupName": "auto",
        "InstanceType": "ml.g5.12xlarge",
        "CurrentCount": 1,
        "TargetCount": 1,
        "ExecutionRole": "arn:aws:iam::111122223333:role/x",
    }
    cluster.sim.extra["hyperpod_cluster"] = {"ClusterName": "hp-test", "InstanceGroups": [group]}
    cluster.create(
        "karpenter.sagemaker.amazonaws.com",
        "hyperpodnodeclasses",
        {"metadata": {"name": "nc"}, "spec": {"instanceGroups": ["auto"]}},
    )
    ref = {"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass", "name": "nc"}
    cluster.create(
        "karpenter.sh",
        "nodepools",
        {
            "metadata": {"name": "np"},
            "spec": {"template": {"spec": {"nodeClassRef": ref}}, "limits": {"nvidia.com/gpu": "8"}},
        },
    )
    for i in range(4):  # each needs a whole node: one fits the existing node, three would need new ones
        cluster.create("", "pods", {"metadata": {"name": f"big-{i}"}, "spec": pod_spec(4)})
    deadline = time.monotonic() + 60
    while not calls and time.monotonic() < deadline:
        time.sleep(0.02)
    (call,) = calls
    assert call[1]["InstanceGroups"][0]["InstanceCount"] == 2  # 8 GPUs allowed: one more node only
    assert call[1]["InstanceGroups"][0]["ExecutionRole"] == "arn:aws:iam::111122223333:role/x"
