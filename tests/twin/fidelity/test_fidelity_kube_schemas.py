"""Custom resources and built-in kinds are validated as kube-apiserver validates them: 422 naming the field.

A standalone twin API server is driven by the official Kubernetes client over HTTPS; the CRDs are the
twin's copies of the real ones (`hyperpod_twin/crds`), installed through the API as an add-on or a
chart would install them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from hyperpod_twin.sim.crds import crd_manifests
from tests.support.twin_kube import Cluster, standalone_cluster

NS = "fidelity"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One API server with the training, inference and Karpenter CRDs installed through the API."""
    with standalone_cluster(tmp_path_factory.mktemp("fidelity-kube")) as cluster:
        ext = kubernetes.client.ApiextensionsV1Api(cluster.api)
        for bundle in ("training-operator", "inference-operator", "karpenter"):
            for manifest in crd_manifests(bundle):
                ext.create_custom_resource_definition(manifest)
        kubernetes.client.CoreV1Api(cluster.api).create_namespace({"metadata": {"name": NS}})
        yield cluster


def _refusal(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as info:
        call(*args)
    assert info.value.status == 422, info.value.body
    body: dict[str, Any] = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["reason"] == "Invalid" and body["code"] == 422
    return body


def _fields(body: dict[str, Any]) -> set[str]:
    return {c["field"] for c in body["details"]["causes"]}


HPJOB: dict[str, Any] = {
    "apiVersion": "sagemaker.amazonaws.com/v1",
    "kind": "HyperPodPyTorchJob",
    "metadata": {"name": "train"},
    "spec": {
        "nprocPerNode": "8",
        "replicaSpecs": [
            {
                "name": "pod",
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch-job-container",
                                "image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/train:1",
                                "resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}},
                            }
                        ]
                    }
                },
            }
        ],
        "runPolicy": {"jobMaxRetryCount": 3, "restartPolicy": {"evalPeriodSeconds": 3600}},
    },
}

IEC: dict[str, Any] = {
    "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
    "kind": "InferenceEndpointConfig",
    "metadata": {"name": "qwen"},
    "spec": {
        "modelName": "qwen",
        "instanceType": "ml.g5.8xlarge",
        "modelSourceConfig": {"modelSourceType": "s3", "s3Storage": {"bucketName": "b", "region": "us-west-2"}},
        "worker": {
            "image": "vllm/vllm-openai:v0.8.5",
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "modelInvocationPort": {"containerPort": 8000},
            "modelVolumeMount": {"name": "model-weights"},
        },
    },
}

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass",
                                 "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ml.g5.8xlarge"]}
                ],
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"},
        "weight": 10,
    },
}


def _with(base: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    node = obj
    for key in path[:-1]:
        node = node[key]
    if value is _DROP:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


_DROP = object()
_HP = ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs")
_INF = ("inference.sagemaker.aws.amazon.com", "v1", "inferenceendpointconfigs")


def _create_namespaced(kube: Cluster, gvp: tuple[str, str, str], obj: dict[str, Any]) -> Any:
    api = kubernetes.client.CustomObjectsApi(kube.api)
    return api.create_namespaced_custom_object(*gvp[:2], NS, gvp[2], obj)


def _create_nodepool(kube: Cluster, obj: dict[str, Any]) -> Any:
    return kubernetes.client.CustomObjectsApi(kube.api).create_cluster_custom_object("karpenter.sh", "v1", "nodepools",
                                                                                    obj)


def test_valid_objects_are_stored_with_their_schema_defaults(kube: Cluster) -> None:
    job = _create_namespaced(kube, _HP, _with(HPJOB, ["spec", "nprocPerNode"], _DROP))
    assert job["spec"]["nprocPerNode"] == "auto"  # the CRD's default
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "All"
    iec = _create_namespaced(kube, _INF, IEC)
    assert iec["spec"]["replicas"] == 1 and iec["spec"]["worker"]["modelInvocationPort"]["name"] == "http"
    pool = _create_nodepool(kube, NODEPOOL)
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "720h"


@pytest.mark.parametrize(
    ("path", "value", "field", "wording"),
    [
        (["spec", "replicaSpecs", 0, "replicas"], "two", "spec.replicaSpecs[0].replicas",
         'in body must be of type integer: "string"'),
        (["spec", "replicaSpecs", 0, "name"], _DROP, "spec.replicaSpecs[0].name", "Required value"),
        (["spec", "runPolicy", "restartPolicy", "evalPeriodSeconds"], _DROP,
         "spec.runPolicy.restartPolicy.evalPeriodSeconds", "Required value"),
        (["spec", "replicaSpecs", 0, "template", "spec", "containers"], _DROP,
         "spec.replicaSpecs[0].template.spec.containers", "Required value"),
        (["spec", "runPolicy", "jobMaxRetryCount"], "3", "spec.runPolicy.jobMaxRetryCount", "must be of type integer"),
    ],
    ids=["replicas-type", "replica-name", "eval-period", "containers", "retry-type"],
)
def test_invalid_hyperpod_pytorch_job_is_422(kube: Cluster, path: list[Any], value: Any, field: str,
                                             wording: str) -> None:
    body = _refusal(_create_namespaced, kube, _HP, _with(HPJOB, path, value))
    assert field in _fields(body)
    assert body["message"].startswith('HyperPodPyTorchJob.sagemaker.amazonaws.com "train" is invalid: ')
    assert f"{field}: " in body["message"] and wording in body["message"]


@pytest.mark.parametrize(
    ("path", "value", "field", "wording"),
    [
        (["spec", "worker"], _DROP, "spec.worker", "Required value"),
        (["spec", "instanceType"], "g5.8xlarge", "spec.instanceType", "in body should match '^ml\\..*'"),
        (["spec", "modelName"], "m" * 64, "spec.modelName", "Too long: may not be more than 63"),
        (["spec", "modelSourceConfig", "modelSourceType"], "ftp", "spec.modelSourceConfig.modelSourceType",
         'Unsupported value: "ftp": supported values: "fsx", "s3", "huggingface", "kubernetesVolume"'),
        (["spec", "worker", "modelInvocationPort", "containerPort"], 70000,
         "spec.worker.modelInvocationPort.containerPort", "should be less than or equal to 65535"),
        (["spec", "worker", "modelVolumeMount"], _DROP, "spec.worker.modelVolumeMount", "Required value"),
    ],
    ids=["no-worker", "instance-type-pattern", "model-name-length", "source-enum", "port-range", "volume-mount"],
)
def test_invalid_inference_endpoint_config_is_422(kube: Cluster, path: list[Any], value: Any, field: str,
                                                  wording: str) -> None:
    obj = _with(IEC, path, value)
    obj["metadata"]["name"] = "bad"
    body = _refusal(_create_namespaced, kube, _INF, obj)
    assert field in _fields(body)
    assert body["details"]["kind"] == "InferenceEndpointConfig"
    assert body["details"]["group"] == "inference.sagemaker.aws.amazon.com"
    assert wording in body["message"]


@pytest.mark.parametrize(
    ("path", "value", "field", "wording"),
    [
        (["spec", "template"], _DROP, "spec.template", "Required value"),
        (["spec", "disruption", "consolidationPolicy"], "Sometimes", "spec.disruption.consolidationPolicy",
         'Unsupported value: "Sometimes"'),
        (["spec", "weight"], 101, "spec.weight", "should be less than or equal to 100"),
        (["spec", "template", "spec", "requirements", 0, "operator"], "Maybe",
         "spec.template.spec.requirements[0].operator", 'Unsupported value: "Maybe"'),
        (["spec", "template", "spec", "nodeClassRef", "name"], _DROP, "spec.template.spec.nodeClassRef.name",
         "Required value"),
        (["spec", "template", "spec", "expireAfter"], "30 days", "spec.template.spec.expireAfter",
         "in body should match"),
    ],
    ids=["no-template", "consolidation-enum", "weight-max", "operator-enum", "node-class-name", "expire-pattern"],
)
def test_invalid_nodepool_is_422(kube: Cluster, path: list[Any], value: Any, field: str, wording: str) -> None:
    body = _refusal(_create_nodepool, kube, _with(NODEPOOL, path, value))
    assert field in _fields(body)
    assert body["message"].startswith('NodePool.karpenter.sh "gpu" is invalid: ')
    assert wording in body["message"]


def test_hyperpod_node_class_allows_at_most_ten_groups(kube: Cluster) -> None:
    api = kubernetes.client.CustomObjectsApi(kube.api)
    obj = {"apiVersion": "karpenter.sagemaker.amazonaws.com/v1", "kind": "HyperpodNodeClass",
           "metadata": {"name": "many"}, "spec": {"instanceGroups": [f"g{i}" for i in range(11)]}}
    body = _refusal(api.create_cluster_custom_object, "karpenter.sagemaker.amazonaws.com", "v1",
                    "hyperpodnodeclasses", obj)
    assert body["details"]["causes"][0] == {"reason": "FieldValueTooMany", "field": "spec.instanceGroups",
                                            "message": "Too many: 11: must have at most 10 items"}


def test_updates_and_patches_are_validated_too(kube: Cluster) -> None:
    api = kubernetes.client.CustomObjectsApi(kube.api)
    obj = _with(HPJOB, ["metadata", "name"], "patched")
    api.create_namespaced_custom_object(*_HP[:2], NS, _HP[2], obj)
    body = _refusal(api.patch_namespaced_custom_object, *_HP[:2], NS, _HP[2], "patched",
                    {"spec": {"runPolicy": {"jobMaxRetryCount": "many"}}})
    assert "spec.runPolicy.jobMaxRetryCount" in _fields(body)


def test_several_violations_are_listed_in_one_message(kube: Cluster) -> None:
    obj = _with(_with(NODEPOOL, ["spec", "weight"], 0), ["spec", "disruption", "consolidationPolicy"], "x")
    body = _refusal(_create_nodepool, kube, obj)
    assert {"spec.weight", "spec.disruption.consolidationPolicy"} <= _fields(body)
    assert body["message"].startswith('NodePool.karpenter.sh "gpu" is invalid: [')


# -- built-in kinds -----------------------------------------------------------------------------


def _deployment(name: str, selector: dict[str, Any] | None, labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1, "template": {"metadata": {"labels": labels},
                                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def test_deployment_without_selector_is_422(kube: Cluster) -> None:
    # The typed client refuses this itself; kubectl or a plain request reaches the server.
    resp = kube.raw("POST", f"/apis/apps/v1/namespaces/{NS}/deployments", body=_deployment("nosel", None, {"app": "x"}))
    resp.read()
    assert resp.status == 422
    body = json.loads(resp.data)
    assert "spec.selector" in _fields(body)
    assert body["message"] == 'Deployment.apps "nosel" is invalid: spec.selector: Required value'


def test_deployment_selector_must_match_template_labels(kube: Cluster) -> None:
    apps = kubernetes.client.AppsV1Api(kube.api)
    body = _refusal(apps.create_namespaced_deployment, NS,
                    _deployment("mismatch", {"matchLabels": {"app": "x"}}, {"app": "y"}))
    assert "spec.template.metadata.labels" in _fields(body)
    assert "`selector` does not match template `labels`" in body["message"]


def test_deployment_selector_is_immutable(kube: Cluster) -> None:
    apps = kubernetes.client.AppsV1Api(kube.api)
    apps.create_namespaced_deployment(NS, _deployment("web", {"matchLabels": {"app": "web"}}, {"app": "web"}))
    patch = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}},
                      "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}}}}
    body = _refusal(apps.patch_namespaced_deployment, "web", NS, patch)
    assert "spec.selector" in _fields(body) and "field is immutable" in body["message"]


def test_service_and_namespace_names_are_dns_labels(kube: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(kube.api)
    svc = {"metadata": {"name": "my.service"}, "spec": {"ports": [{"port": 80}]}}
    assert "metadata.name" in _fields(_refusal(core.create_namespaced_service, NS, svc))
    assert "metadata.name" in _fields(_refusal(core.create_namespace, {"metadata": {"name": "team.a"}}))


def test_service_without_ports_is_422(kube: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(kube.api)
    body = _refusal(core.create_namespaced_service, NS, {"metadata": {"name": "noports"}, "spec": {}})
    assert "spec.ports" in _fields(body)


def test_job_template_is_immutable(kube: Cluster) -> None:
    batch = kubernetes.client.BatchV1Api(kube.api)
    job = {"metadata": {"name": "once"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    batch.create_namespaced_job(NS, job)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
    body = _refusal(batch.patch_namespaced_job, "once", NS, patch)
    assert "spec.template" in _fields(body)


def test_field_selectors_accept_only_the_kinds_field_labels(kube: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(kube.api)
    assert core.list_namespaced_pod(NS, field_selector="status.phase!=Succeeded,spec.nodeName=n1").items == []
    for call, selector in ((core.list_namespaced_pod, "spec.containers"), (core.list_namespaced_config_map, "data.x")):
        with pytest.raises(ApiException) as info:
            call(NS, field_selector=f"{selector}=y")
        assert info.value.status == 400 and f"field label not supported: {selector}" in info.value.body
    api = kubernetes.client.CustomObjectsApi(kube.api)
    with pytest.raises(ApiException) as info:
        api.list_namespaced_custom_object(*_HP[:2], NS, _HP[2], field_selector="spec.nprocPerNode=8")
    assert info.value.status == 400
    named = api.list_namespaced_custom_object(*_HP[:2], NS, _HP[2], field_selector="metadata.name=train")
    assert [i["metadata"]["name"] for i in named["items"]] == ["train"]
