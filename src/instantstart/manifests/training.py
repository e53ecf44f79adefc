"""HyperPodPyTorchJob builder: pods launched through hyperpodrun, with an explicit recovery budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from instantstart.manifests import fsx
from instantstart.manifests.env import EnvValue, env_entries
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL, LABEL_MANAGED, MANAGER
from instantstart.manifests.resources import GPU as GPU
from instantstart.manifests.resources import PodResources, efa_env

GROUP = "sagemaker.amazonaws.com"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "HyperPodPyTorchJob"
PLURAL = "hyperpodpytorchjobs"
CRD = f"{PLURAL}.{GROUP}"
LABEL_RECIPE = "instantstart.io/recipe"
POD_JOB_LABEL = "HPJob"  # the label the operator puts on a job's pods
CONTAINER = "pytorch-job-container"
REPLICA = "pod"
LAUNCHER = "hyperpodrun"
AGENT_PORT = 8080  # the elastic agent's server port (FACTS §6.1)
S3_MOUNT = "/s3"


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-{mode}-topology"
# The only topology labels the HyperPod tooling accepts for Kueue topology (FACTS §3).
TOPOLOGY_LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                   "topology.k8s.aws/network-node-layer-3", "topology.k8s.aws/ultraserver-id")


@dataclass(frozen=True)
class Scheduling:
    """Task governance: the Kueue LocalQueue and priority class (job labels) and the podset topology."""

    queue: str | None = None
    priority: str | None = None
    topology: tuple[str, str] | None = None  # (preferred|required, topology label)


@dataclass(frozen=True)
class LogMonitor:
    """One logMonitoringConfiguration entry: the job hangs when `log_pattern` is not seen in time (FACTS §6.1)."""

    name: str
    log_pattern: str
    expected_start_cut_off_seconds: int | None = None
    expected_recurring_frequency_seconds: int | None = None
    stop_pattern: str | None = None

    def render(self) -> dict[str, Any]:
        """The entry as the operator reads it (unset fields left out)."""
        out: dict[str, Any] = {"name": self.name, "logPattern": self.log_pattern}
        if self.expected_start_cut_off_seconds is not None:
            out["expectedStartCutOffInSeconds"] = self.expected_start_cut_off_seconds
        if self.expected_recurring_frequency_seconds is not None:
            out["expectedRecurringFrequencyInSeconds"] = self.expected_recurring_frequency_seconds
        if self.stop_pattern is not None:
            out["stopPattern"] = self.stop_pattern
        return out


@dataclass(frozen=True)
class RunPolicy:
    """The recovery budget: job-level retries, in-place pod restarts before a full restart, the window."""

    job_max_retry_count: int = 5
    num_restart_before_full_job_restart: int = 3
    eval_period_seconds: int = 21600
    max_full_job_restarts: int = 1
    # Keep finished pods (the HyperPod template's choice) so their logs stay readable; the job and its pods go
    # `ttl_seconds_after_finished` after it finishes (0: kept until deleted).
    clean_pod_policy: str = "None"
    log_monitoring: tuple[LogMonitor, ...] = ()
    ttl_seconds_after_finished: int = 0

    def render(self) -> dict[str, Any]:
        """runPolicy as the operator reads it."""
        out: dict[str, Any] = {
            "jobMaxRetryCount": self.job_max_retry_count,
            "restartPolicy": {
                "numRestartBeforeFullJobRestart": self.num_restart_before_full_job_restart,
                "evalPeriodSeconds": self.eval_period_seconds,
                "maxFullJobRestarts": self.max_full_job_restarts,
            },
            "cleanPodPolicy": self.clean_pod_policy,
        }
        if self.ttl_seconds_after_finished:
            out["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        if self.log_monitoring:
            out["logMonitoringConfiguration"] = [monitor.render() for monitor in self.log_monitoring]
        return out


@dataclass(frozen=True)
class JobSpec:
    """Everything a HyperPodPyTorchJob is built from."""

    name: str
    namespace: str
    image: str
    entry: list[str]
    nodes: int
    nproc_per_node: str
    resources: PodResources
    instance_type: str
    env: dict[str, EnvValue] = field(default_factory=dict)
    s3_claim: str | None = None
    fsx_claim: str | None = None  # an FSx for Lustre claim mounted read-write at /fsx
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    elastic: tuple[int, int] | None = None  # (minReplicas, maxReplicas)
    recipe: str | None = None
    pod_annotations: dict[str, str] = field(default_factory=dict)
    scheduling: Scheduling | None = None
    service_account: str | None = None  # the pods' identity (MLflow writers: mlflow_configure's account)


def command(spec: JobSpec) -> list[str]:
    """hyperpodrun with the node and process counts, then the entry point (never torchrun)."""
    nnodes = f"{spec.elastic[0]}:{spec.elastic[1]}" if spec.elastic else str(spec.nodes)
    return [LAUNCHER, f"--nnodes={nnodes}", f"--nproc-per-node={spec.nproc_per_node}", *spec.entry]


def _container(spec: JobSpec) -> dict[str, Any]:
    # EFA settings first so a user's own value for one of them wins.
    env: dict[str, EnvValue] = {**efa_env(spec.resources), "NNODES": str(spec.nodes),
                                "NPROC_PER_NODE": spec.nproc_per_node, **spec.env}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "command": command(spec),
        "env": env_entries(env),
        "ports": [{"containerPort": AGENT_PORT}],
        "resources": spec.resources.render(),
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],  # noqa: S108 (a memory volume for NCCL)
    }
    if spec.s3_claim:
        container["volumeMounts"].append({"name": "s3", "mountPath": S3_MOUNT})
    if spec.fsx_claim:
        container["volumeMounts"].append(fsx.claim_mount())
    return container


def job(spec: JobSpec) -> dict[str, Any]:
    """The HyperPodPyTorchJob object (FACTS §6.1)."""
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    if spec.s3_claim:
        volumes.append({"name": "s3", "persistentVolumeClaim": {"claimName": spec.s3_claim}})
    if spec.fsx_claim:
        volumes.append(fsx.claim_volume(spec.fsx_claim))
    labels = {LABEL_MANAGED: MANAGER}
    if spec.recipe:
        labels[LABEL_RECIPE] = spec.recipe
    template: dict[str, Any] = {
        "metadata": {"labels": dict(labels)},
        "spec": {
            "nodeSelector": {INSTANCE_TYPE_LABEL: spec.instance_type},
            "containers": [_container(spec)],
            "volumes": volumes,
        },
    }
    annotations = dict(spec.pod_annotations)
    sched = spec.scheduling
    if sched and sched.topology:
        annotations[TOPOLOGY_ANNOTATION.format(mode=sched.topology[0])] = sched.topology[1]
    if annotations:
        template["metadata"]["annotations"] = annotations
    if spec.service_account:
        template["spec"]["serviceAccountName"] = spec.service_account
    if sched and sched.queue:
        labels[QUEUE_LABEL] = sched.queue
    if sched and sched.priority:
        labels[PRIORITY_LABEL] = sched.priority
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "nprocPerNode": spec.nproc_per_node,
            "replicaSpecs": [{"name": REPLICA, "replicas": spec.nodes, "template": template}],
            "runPolicy": spec.run_policy.render(),
        },
    }
    if spec.elastic:
        body["spec"]["replicaSpecs"][0]["maxReplicas"] = spec.elastic[1]
        body["spec"]["elasticPolicy"] = {"minReplicas": spec.elastic[0], "maxReplicas": spec.elastic[1]}
    return body
