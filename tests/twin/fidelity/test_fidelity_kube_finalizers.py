"""Finalizers hold deletion as on a real cluster: namespace deletion, garbage collection and CRD removal
delete through the API, and a Terminating namespace waits for its content, with kube's conditions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from hyperpod_twin.sim.crds import crd_manifests
from tests.support.twin_kube import Cluster, standalone_cluster

HOLD = "fidelity.instantstart.dev/hold"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One API server with the training operator's CRD."""
    with standalone_cluster(tmp_path_factory.mktemp("fidelity-finalizers")) as cluster:
        ext = kubernetes.client.ApiextensionsV1Api(cluster.api)
        for manifest in crd_manifests("training-operator"):
            ext.create_custom_resource_definition(manifest)
        yield cluster


def _core(kube: Cluster) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kube.api)


def _namespace(kube: Cluster, name: str) -> dict[str, Any] | None:
    resp = kube.raw("GET", f"/api/v1/namespaces/{name}")
    resp.read()
    if resp.status == 404:
        return None
    loaded: dict[str, Any] = json.loads(resp.data)
    return loaded


def _unhold(kube: Cluster, namespace: str, name: str) -> None:
    _core(kube).patch_namespaced_config_map(name, namespace, {"metadata": {"finalizers": None}})


def test_namespace_with_a_finalized_object_stays_terminating_until_the_finalizer_goes(kube: Cluster) -> None:
    core = _core(kube)
    core.create_namespace({"metadata": {"name": "held"}})
    core.create_namespaced_config_map("held", {"metadata": {"name": "keep", "finalizers": [HOLD]}})
    core.create_namespaced_config_map("held", {"metadata": {"name": "plain"}})
    core.delete_namespace("held")

    ns = _namespace(kube, "held")
    assert ns is not None, "the namespace went while an object with a finalizer was still in it"
    assert ns["status"]["phase"] == "Terminating" and ns["metadata"]["deletionTimestamp"]
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    conditions = {c["type"]: c for c in ns["status"]["conditions"]}
    assert conditions["NamespaceContentRemaining"]["status"] == "True"
    assert "configmaps. has 1 resource instances" in conditions["NamespaceContentRemaining"]["message"]
    assert conditions["NamespaceFinalizersRemaining"]["message"] == (
        f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource instances"
    )
    # The plain object is gone; the held one is marked for deletion and new content is refused.
    kept = core.read_namespaced_config_map("keep", "held")
    assert kept.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("plain", "held")
    assert info.value.status == 404
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("held", {"metadata": {"name": "late"}})
    assert info.value.status == 403

    _unhold(kube, "held", "keep")
    assert _namespace(kube, "held") is None


def test_garbage_collection_honours_the_dependents_finalizers(kube: Cluster) -> None:
    core = _core(kube)
    core.create_namespace({"metadata": {"name": "gc"}})
    owner = core.create_namespaced_config_map("gc", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map("gc", {"metadata": {"name": "child", "ownerReferences": [ref],
                                                          "finalizers": [HOLD]}})
    core.delete_namespaced_config_map("owner", "gc")
    child = core.read_namespaced_config_map("child", "gc")
    assert child.metadata.deletion_timestamp is not None  # held, not gone
    _unhold(kube, "gc", "child")
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("child", "gc")
    assert info.value.status == 404


def test_crd_removal_honours_instance_finalizers(kube: Cluster) -> None:
    core = _core(kube)
    core.create_namespace({"metadata": {"name": "crd-cleanup"}})
    api = kubernetes.client.CustomObjectsApi(kube.api)
    job = {"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
           "metadata": {"name": "held", "finalizers": [HOLD]},
           "spec": {"replicaSpecs": [{"name": "pod", "replicas": 1}]}}
    api.create_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "crd-cleanup", "hyperpodpytorchjobs", job)
    ext = kubernetes.client.ApiextensionsV1Api(kube.api)
    ext.delete_custom_resource_definition("hyperpodpytorchjobs.sagemaker.amazonaws.com")
    held = api.get_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "crd-cleanup", "hyperpodpytorchjobs",
                                            "held")
    assert held["metadata"]["deletionTimestamp"]
    api.patch_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "crd-cleanup", "hyperpodpytorchjobs", "held",
                                       {"metadata": {"finalizers": None}})
    resp = kube.raw("GET", "/apis/sagemaker.amazonaws.com/v1/namespaces/crd-cleanup/hyperpodpytorchjobs")
    resp.read()
    assert resp.status == 404  # the kind is no longer served once its last instance is gone
