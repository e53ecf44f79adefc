"""RayJob builder (KubeRay `ray.io/v1`, FACTS §6.4): a head and one GPU worker group on HyperPod nodes."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from instantstart.manifests import fsx
from instantstart.manifests import training as m
from instantstart.manifests.resources import PodResources, efa_env

GROUP = "ray.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "RayJob"
PLURAL = "rayjobs"
CRD = f"{PLURAL}.{GROUP}"
CLUSTER_LABEL = "ray.io/cluster"  # KubeRay's label on every pod of a RayCluster
SUBMITTER_LABEL = "batch.kubernetes.io/job-name"  # the submitter Job's pods (K8sJobMode)
WORKER_GROUP = "gpu-workers"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
HEAD_CPU = 2
HEAD_MEMORY_GIB = 8


@dataclass(frozen=True)
class RayJobSpec:
    """Everything a RayJob is built from."""

    name: str
    namespace: str
    image: str
    entrypoint: list[str]
    workers: int
    worker: PodResources  # each worker's requests, sized from the instance-type catalog
    instance_type: str
    env: dict[str, str] = field(default_factory=dict)
    s3_claim: str | None = None
    fsx_claim: str | None = None  # an FSx for Lustre claim mounted read-write at /fsx
    recipe: str | None = None
    pod_annotations: dict[str, str] = field(default_factory=dict)
    backoff_limit: int = 0
    ttl_seconds_after_finished: int = 3600
    active_deadline_seconds: int | None = None
    service_account: str | None = None  # the pods' identity (MLflow writers: mlflow_configure's account)


def _volumes(spec: RayJobSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": "/dev/shm"}]  # noqa: S108 (NCCL shared memory)
    if spec.s3_claim:
        volumes.append({"name": "s3", "persistentVolumeClaim": {"claimName": spec.s3_claim}})
        mounts.append({"name": "s3", "mountPath": m.S3_MOUNT})
    if spec.fsx_claim:
        volumes.append(fsx.claim_volume(spec.fsx_claim))
        mounts.append(fsx.claim_mount())
    return volumes, mounts


def _template(spec: RayJobSpec, container: str, resources: dict[str, Any],
              env: dict[str, str]) -> dict[str, Any]:
    volumes, mounts = _volumes(spec)
    labels = {m.LABEL_MANAGED: m.MANAGED_BY}
    if spec.recipe:
        labels[m.LABEL_RECIPE] = spec.recipe
    template: dict[str, Any] = {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {m.INSTANCE_TYPE_LABEL: spec.instance_type},
            "containers": [{
                "name": container,
                "image": spec.image,
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": resources,
                "volumeMounts": mounts,
            }],
            "volumes": volumes,
        },
    }
    if spec.pod_annotations:
        template["metadata"]["annotations"] = dict(spec.pod_annotations)
    if spec.service_account:
        template["spec"]["serviceAccountName"] = spec.service_account
    return template


def ray_job(spec: RayJobSpec) -> dict[str, Any]:
    """The RayJob: its own RayCluster (a CPU head, `workers` GPU workers), deleted when the job finishes. The head
    asks for no accelerator at all (no `nvidia.com/gpu: 0`, meaningless on a Trainium node); workers get their
    accelerators, EFA and the libfabric env (the user's env wins)."""
    head = {"cpu": str(HEAD_CPU), "memory": f"{HEAD_MEMORY_GIB}Gi"}
    labels = {m.LABEL_MANAGED: m.MANAGED_BY}
    if spec.recipe:
        labels[m.LABEL_RECIPE] = spec.recipe
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "entrypoint": shlex.join(spec.entrypoint),
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
            "backoffLimit": spec.backoff_limit,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
                    "template": _template(spec, HEAD_CONTAINER, {"requests": dict(head), "limits": dict(head)},
                                          spec.env),
                },
                "workerGroupSpecs": [{
                    "groupName": WORKER_GROUP,
                    "replicas": spec.workers,
                    "minReplicas": spec.workers,
                    "maxReplicas": spec.workers,
                    "rayStartParams": {},
                    "template": _template(spec, WORKER_CONTAINER, spec.worker.render(),
                                          {**efa_env(spec.worker), **spec.env}),
                }],
            },
        },
    }
    if spec.active_deadline_seconds is not None:
        body["spec"]["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return body
