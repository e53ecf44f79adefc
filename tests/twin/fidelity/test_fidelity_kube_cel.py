"""CEL rules (`x-kubernetes-validations`) and OpenAPI `format` of the real CRDs are enforced as kube-apiserver does.

The rules are the ones Karpenter, Kueue and KubeRay ship in their CRDs (`hyperpod_twin/crds`): a write that
breaks one is 422 with the rule's message at the field that declares it; a transition rule (`oldSelf`) judges
updates only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from hyperpod_twin.crds import crd as real_crd
from hyperpod_twin.kube import cel_rules
from hyperpod_twin.sim.crds import BUNDLES, crd_manifests
from tests.support.twin_kube import Cluster, standalone_cluster

NS = "cel"
POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass",
                                 "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ml.g5.8xlarge"]}
                ],
            },
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"},
    },
}


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One API server with Karpenter, Kueue (task governance), KubeRay and cert-manager CRDs installed."""
    with standalone_cluster(tmp_path_factory.mktemp("fidelity-cel")) as cluster:
        ext = kubernetes.client.ApiextensionsV1Api(cluster.api)
        for bundle in ("karpenter", "task-governance", "kuberay", "cert-manager"):
            for manifest in crd_manifests(bundle):
                ext.create_custom_resource_definition(manifest)
        kubernetes.client.CoreV1Api(cluster.api).create_namespace({"metadata": {"name": NS}})
        yield cluster


def _objects(kube: Cluster) -> Any:
    return kubernetes.client.CustomObjectsApi(kube.api)


def _refused(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as info:
        call(*args)
    assert info.value.status == 422, info.value.body
    body: dict[str, Any] = json.loads(info.value.body)
    assert body["reason"] == "Invalid"
    return body


def _pool(name: str, **spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(POOL)
    obj["metadata"]["name"] = name
    obj["spec"].update(spec)
    return obj


def test_every_rule_of_every_shipped_crd_is_evaluable() -> None:
    # A rule the twin could not compile or lacks a function for would silently pass: none may exist.
    problems = {}
    for manifests in BUNDLES.values():
        for crd in manifests:
            for rule in _rules(crd):
                compiled = cel_rules.compile_rule(rule)
                if compiled.problem:
                    problems[rule] = compiled.problem
    assert problems == {}
    assert sum(len(_rules(c)) for m in BUNDLES.values() for c in m) >= 40


def _rules(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for rule in node.get("x-kubernetes-validations") or []:
            found.append(rule["rule"])
        for value in node.values():
            found += _rules(value)
    elif isinstance(node, list):
        for value in node:
            found += _rules(value)
    return found


def test_a_valid_pool_passes_every_rule(kube: Cluster) -> None:
    pool = _objects(kube).create_cluster_custom_object("karpenter.sh", "v1", "nodepools", _pool("ok"))
    assert pool["spec"]["template"]["metadata"]["labels"] == {"team": "ml"}


def test_restricted_label_domain_is_refused_with_the_rules_message(kube: Cluster) -> None:
    # Karpenter's rule on spec.template.metadata.labels (a Kubernetes `find` regex call).
    obj = _pool("restricted")
    obj["spec"]["template"]["metadata"]["labels"] = {"karpenter.sh/custom": "x"}
    body = _refused(_objects(kube).create_cluster_custom_object, "karpenter.sh", "v1", "nodepools", obj)
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.template.metadata.labels",
        "message": 'Invalid value: "object": label domain "karpenter.sh" is restricted'}]
    assert body["message"] == ('NodePool.karpenter.sh "restricted" is invalid: spec.template.metadata.labels: '
                               'Invalid value: "object": label domain "karpenter.sh" is restricted')


def test_requirement_rules_judge_each_list_item(kube: Cluster) -> None:
    obj = _pool("reqs")
    obj["spec"]["template"]["spec"]["requirements"] = [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["1", "2"]},
    ]
    body = _refused(_objects(kube).create_cluster_custom_object, "karpenter.sh", "v1", "nodepools", obj)
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    assert ("spec.template.spec.requirements[0].key",
            'Invalid value: "string": label "kubernetes.io/hostname" is restricted') in causes
    assert ("spec.template.spec.requirements",
            "Invalid value: \"array\": requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single "
            "positive integer value") in causes


def test_static_pool_rules(kube: Cluster) -> None:
    body = _refused(_objects(kube).create_cluster_custom_object, "karpenter.sh", "v1", "nodepools",
                    _pool("static", replicas=2, weight=5))
    assert [c["message"] for c in body["details"]["causes"]] == [
        "Invalid value: \"object\": 'weight' is not supported on static NodePools"]


def test_transition_rule_refuses_switching_provisioning_mode(kube: Cluster) -> None:
    # has(self.replicas) == has(oldSelf.replicas): create is fine, the update that adds replicas is not.
    api = _objects(kube)
    api.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", _pool("dynamic"))
    body = _refused(api.patch_cluster_custom_object, "karpenter.sh", "v1", "nodepools", "dynamic",
                    {"spec": {"replicas": 3}})
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec",
        "message": 'Invalid value: "object": Cannot transition NodePool between static (replicas set) and '
                   "dynamic (replicas unset) provisioning modes"}]
    # An update that keeps the mode passes the same rule.
    api.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "dynamic", {"spec": {"weight": 7}})


def test_immutable_field_rule_of_kueue_local_queue(kube: Cluster) -> None:
    # Kueue's LocalQueue: spec.clusterQueue `self == oldSelf`, "field is immutable".
    api = _objects(kube)
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "team"},
             "spec": {"clusterQueue": "cq-a"}}
    api.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", NS, "localqueues", queue)
    body = _refused(api.patch_namespaced_custom_object, "kueue.x-k8s.io", "v1beta1", NS, "localqueues", "team",
                    {"spec": {"clusterQueue": "cq-b"}})
    assert body["details"]["causes"][0]["field"] == "spec.clusterQueue"
    assert body["details"]["causes"][0]["message"] == 'Invalid value: "string": field is immutable'


def test_kuberay_managed_by_value_rule(kube: Cluster) -> None:
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
               "spec": {"managedBy": "someone-else", "headGroupSpec": {"rayStartParams": {}, "template": {
                   "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}}}
    body = _refused(_objects(kube).create_namespaced_custom_object, "ray.io", "v1", NS, "rayclusters", cluster)
    assert body["details"]["causes"][0]["field"] == "spec.managedBy"
    assert "must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'" in (
        body["details"]["causes"][0]["message"])


def test_runtime_error_of_a_rule_is_reported(kube: Cluster) -> None:
    # int("many") fails at runtime; the apiserver reports the error with the rule.
    obj = _pool("runtime")
    obj["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["many"]}]
    body = _refused(_objects(kube).create_cluster_custom_object, "karpenter.sh", "v1", "nodepools", obj)
    message = body["details"]["causes"][0]["message"]
    assert body["details"]["causes"][0]["field"] == "spec.template.spec.requirements"
    assert "evaluating rule: self.all(x, (x.operator == 'Gt'" in message


def test_unevaluable_rule_warns_instead_of_passing_silently(kube: Cluster) -> None:
    crd = copy.deepcopy(real_crd("workloadpriorityclasses.kueue.x-k8s.io"))
    crd["metadata"]["name"] = "widgets.example.com"
    crd["spec"]["group"], crd["spec"]["names"] = "example.com", {
        "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
            {"rule": "self.value.quantityIsFancy()", "message": "fancy"}]
    kubernetes.client.ApiextensionsV1Api(kube.api).create_custom_resource_definition(crd)
    resp = kube.raw("POST", "/apis/example.com/v1beta1/widgets",
                    body={"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"},
                          "value": 5})
    assert resp.status == 201
    assert "rule not evaluated by the twin" in (resp.getheader("Warning") or "")
    assert "self.value.quantityIsFancy()" in cel_rules.unevaluated()


def test_formats_are_enforced(kube: Cluster) -> None:
    api = _objects(kube)
    # int32: Kueue's WorkloadPriorityClass value.
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "big"},
           "value": 2**31}
    body = _refused(api.create_cluster_custom_object, "kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses", wpc)
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "value",
        "message": "Invalid value: 2147483648: Checked value must be of type integer with format int32 in value"}]
    api.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses",
                                     {**wpc, "value": 2**31 - 1})
    # date-time: a NodePool taint's timeAdded (metav1.Time); byte: a CertificateRequest's PEM request.
    obj = _pool("taints")
    obj["spec"]["template"]["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule", "timeAdded": "yesterday"}]
    body = _refused(api.create_cluster_custom_object, "karpenter.sh", "v1", "nodepools", obj)
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.template.spec.taints[0].timeAdded",
        "message": 'Invalid value: "yesterday": spec.template.spec.taints[0].timeAdded in body must be of type '
                   'date-time: "yesterday"'}]
    obj["spec"]["template"]["spec"]["taints"][0]["timeAdded"] = "2026-12-03T14:00:00Z"
    api.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", obj)
    request = {"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest", "metadata": {"name": "cr"},
               "spec": {"request": "not base64!", "issuerRef": {"name": "ca"}}}
    body = _refused(api.create_namespaced_custom_object, "cert-manager.io", "v1", NS, "certificaterequests", request)
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.request"]
    assert "must be of type byte" in body["details"]["causes"][0]["message"]


def test_a_crd_whose_rule_does_not_compile_is_refused(kube: Cluster) -> None:
    crd = copy.deepcopy(real_crd("workloadpriorityclasses.kueue.x-k8s.io"))
    crd["metadata"]["name"] = "gadgets.example.com"
    crd["spec"]["group"], crd["spec"]["names"] = "example.com", {
        "plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["value"]["x-kubernetes-validations"] = [
        {"rule": "self >= (", "message": "broken"}]
    body = _refused(kubernetes.client.ApiextensionsV1Api(kube.api).create_custom_resource_definition, crd)
    [cause] = body["details"]["causes"]
    assert cause["field"] == ("spec.versions[0].schema.openAPIV3Schema.properties[value]"
                              ".x-kubernetes-validations[0].rule")
    assert cause["message"].startswith('Invalid value: "self >= (": compilation failed: ')
