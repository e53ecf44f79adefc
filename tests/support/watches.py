"""Helpers for watch-fed state tests: the twin's watch controls, CRD bundles as operators install them, a job."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client as k8s

from hyperpod_twin.sim.crds import crd_manifests
from instantstart.manifests import training as training_manifests
from instantstart.manifests.resources import PodResources
from instantstart.twin_process import TwinProcess


def twin_kube(twin: TwinProcess, tag: str, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST /_twin/kube/eks-cluster-{tag}/{action} (watches/cut, watches/block, api/block, history/compact)."""
    response = httpx.post(f"{twin.endpoint_url}/_twin/kube/eks-cluster-{tag}/{action}", json=body or {}, timeout=30)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def install(api: k8s.ApiClient, bundle: str) -> None:
    """The bundle's CRDs, as the operator add-on or chart installs them."""
    for definition in crd_manifests(bundle):
        k8s.ApiextensionsV1Api(api).create_custom_resource_definition(definition)


def pytorch_job(name: str, instance_type: str = "ml.g6.4xlarge") -> dict[str, Any]:
    """A HyperPodPyTorchJob of two nodes as training_job_submit builds it."""
    return training_manifests.job(
        training_manifests.JobSpec(
            name=name,
            namespace="default",
            image="example/train:1",
            entry=["train.py"],
            nodes=2,
            nproc_per_node="1",
            resources=PodResources(gpus=1),
            instance_type=instance_type,
            recipe="demo",
        )
    )
