"""RayJob builder (KubeRay `ray.io/v1`, FACTS §6.4): a head and one GPU worker group on HyperPod nodes, and the
NetworkPolicy that keeps its Ray cluster's ports to itself."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from instantstart.manifests import fsx
from instantstart.manifests import training as train_m
from instantstart.manifests.env import EnvValue, env_entries
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL, LABEL_APP, LABEL_MANAGED, MANAGER, NAMESPACE_NAME_LABEL
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
JOB_LABEL = "instantstart.io/ray-job"  # ours, on the head and worker pods of a RayJob's Ray cluster
DASHBOARD_PORT = 8265  # the Ray dashboard and job-submission API (runs code: never open to every pod)
# The KubeRay operator (its pods' chart label, and the namespace the dependency catalog installs it in) polls the
# dashboard for the job's status.
OPERATOR_NAMESPACE = "ray-system"
OPERATOR_LABELS = {LABEL_APP: "kuberay-operator"}


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
    env: dict[str, EnvValue] = field(default_factory=dict)
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
        mounts.append({"name": "s3", "mountPath": train_m.S3_MOUNT})
    if spec.fsx_claim:
        volumes.append(fsx.claim_volume(spec.fsx_claim))
        mounts.append(fsx.claim_mount())
    return volumes, mounts


def _template(spec: RayJobSpec, container: str, resources: dict[str, Any],
              env: dict[str, EnvValue]) -> dict[str, Any]:
    volumes, mounts = _volumes(spec)
    labels = {LABEL_MANAGED: MANAGER, JOB_LABEL: spec.name}
    if spec.recipe:
        labels[train_m.LABEL_RECIPE] = spec.recipe
    template: dict[str, Any] = {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {INSTANCE_TYPE_LABEL: spec.instance_type},
            "containers": [{
                "name": container,
                "image": spec.image,
                "env": env_entries(env),
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
    labels = {LABEL_MANAGED: MANAGER}
    if spec.recipe:
        labels[train_m.LABEL_RECIPE] = spec.recipe
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


def policy_name(job: str) -> str:
    """The NetworkPolicy of RayJob `job`."""
    return f"{job}-ray"


def network_policy(job: str, namespace: str, owner_uid: str | None = None) -> dict[str, Any]:
    """Ingress to the Ray cluster of RayJob `job` (its head and workers, by JOB_LABEL) only from: its own pods (GCS
    6379, client 10001, raylets, object managers: Ray's ports among its nodes are many), the submitter Job's pods
    and the KubeRay operator (dashboard 8265 only). Any other pod, in any namespace, reaches none of its ports.
    Owned by the RayJob once its uid is known, so it goes when the RayJob goes."""
    own = {"podSelector": {"matchLabels": {JOB_LABEL: job}}}
    dashboard = [{"protocol": "TCP", "port": DASHBOARD_PORT}]
    meta: dict[str, Any] = {"name": policy_name(job), "namespace": namespace,
                            "labels": {LABEL_MANAGED: MANAGER, JOB_LABEL: job}}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": KIND, "name": job, "uid": owner_uid}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": {JOB_LABEL: job}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [own]},
                {"from": [{"podSelector": {"matchLabels": {SUBMITTER_LABEL: job}}}], "ports": dashboard},
                {"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: OPERATOR_NAMESPACE}},
                           "podSelector": {"matchLabels": dict(OPERATOR_LABELS)}}], "ports": dashboard},
            ],
        },
    }
