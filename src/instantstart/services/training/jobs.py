"""Training jobs: list them, their status with the recovery budget used, bounded logs (deletion: job_delete.py)."""

from __future__ import annotations

import shlex
from functools import partial
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import NotFound
from instantstart.kube import core_kinds, custom_objects, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.informers import Informer
from instantstart.manifests import ray_job
from instantstart.manifests import training as training_manifests
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL
from instantstart.operations.waiting import blocking
from instantstart.services.base.pod_logs import PodLogsRequest, read_log
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.status_model import WatchFreshness
from instantstart.services.base.watch import custom, watched
from instantstart.services.base.watch.state import memoised
from instantstart.services.teams.queueing import QueueState, queue_state
from instantstart.services.training import job_logs, job_watch, ray_jobs
from instantstart.services.training.models import JobPod, JobSummary, job_pod
from instantstart.services.training.network import NetworkUse, network_use
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName

_STATES = ("Failed", "Completed", "Restarting", "Running", "Created")
JOB_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class JobsRequest(WireModel):
    """Which cluster and namespace (every namespace when absent)."""

    namespace: KubeName | None = None
    cluster_tag: ClusterTag | None = None


class JobList(WireModel):
    """Jobs, newest first."""

    cluster_tag: str
    jobs: list[JobSummary]
    count: int
    source: str = Field(default="direct", description=watched.SOURCE_HELP)
    watch: WatchFreshness | None = Field(default=None, description="How current the watched jobs are.")
    note: str | None = Field(default=None, description="Why the answer was read directly, or how stale it is.")


async def _row(app: AppContext, tag: str | None) -> ClusterRow:
    resolved = await to_thread.run_sync(resolve_tag, app.db, tag)
    return await to_thread.run_sync(get_cluster, app.db, resolved)


def _state(obj: dict[str, Any]) -> str:
    conds = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
    return next((s for s in _STATES if conds.get(s) == "True"), "Pending")


def _summary(obj: dict[str, Any], kind: str) -> JobSummary:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    if kind == training_manifests.KIND:
        specs = spec.get("replicaSpecs") or []
        nodes = sum(int(r.get("replicas", 1)) for r in specs)
        tmpl = (specs[0].get("template") or {}).get("spec") or {} if specs else {}
    else:
        nodes = int(spec.get("parallelism") or 1)
        tmpl = ((spec.get("template") or {}).get("spec")) or {}
    state = _state(obj) if kind != "Job" else _batch_state(obj)
    return JobSummary(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace")),
        kind=kind,
        state=state,
        nodes=nodes,
        instance_type=(tmpl.get("nodeSelector") or {}).get(INSTANCE_TYPE_LABEL),
        restart_count=int((obj.get("status") or {}).get("restartCount") or 0),
        recipe=(meta.get("labels") or {}).get(training_manifests.LABEL_RECIPE),
        created_at=meta.get("creationTimestamp"),
    )


def _batch_state(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "Completed" if cond["type"] == "Complete" else "Failed"
    return "Running" if status.get("active") else "Pending"


def _custom(api: Api, namespace: str | None) -> list[dict[str, Any]]:
    try:
        out = kube_call("list HyperPodPyTorchJobs", custom_objects.list_custom, api, training_manifests.GROUP,
                        training_manifests.VERSION, training_manifests.PLURAL, namespace or None)
    except NotFound:  # the operator's CRD is not installed: no such jobs
        return []
    return list(out.get("items") or [])


def _summaries(pytorch: list[dict[str, Any]], ray: list[dict[str, Any]]) -> list[JobSummary]:
    jobs = [_summary(o, training_manifests.KIND) for o in pytorch] + [ray_jobs.ray_summary(o) for o in ray]
    return sorted(jobs, key=lambda j: (j.created_at or "", j.name), reverse=True)


def list_training(app: AppContext, row: ClusterRow, namespace: str | None) -> list[JobSummary]:
    """HyperPodPyTorchJobs and RayJobs read directly from the API server (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    return _summaries(_custom(api, namespace), ray_jobs.list_ray(api, namespace))


def _from_watches(namespace: str | None, infs: list[Informer]) -> list[JobSummary]:
    """The jobs the watches hold (informers in TRAINING_KINDS order), summarised once per change of either kind."""
    pytorch, ray = infs

    def compute() -> list[JobSummary]:
        return _summaries(list(pytorch.snapshot()[1].values()), list(ray.snapshot()[1].values()))

    every: list[JobSummary] = memoised(pytorch, "training-jobs", (id(ray), pytorch.version, ray.version), compute)
    return [j for j in every if namespace in (None, j.namespace)]


async def watched_training(app: AppContext, row: ClusterRow, namespace: str | None) -> JobList:
    """HyperPodPyTorchJobs and RayJobs by the status tools' rule (base/watch/watched.py): from the cluster's
    watches, the last watched state marked stale with its age while a watch is down; read directly only when the
    watches have not synced (a job kind whose CRD is not installed counts as synced with no jobs)."""
    got = await watched.from_watches(app, row, custom.TRAINING_KINDS, partial(_from_watches, namespace),
                                     partial(list_training, app, row, namespace))
    return JobList(cluster_tag=row.tag, jobs=got.value, count=len(got.value), source=got.source,
                   watch=got.watch, note=got.note)


def list_batch(app: AppContext, row: ClusterRow) -> list[JobSummary]:
    """Kubernetes batch Jobs in every namespace (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    found = kube_call("list Jobs", core_kinds.list_jobs, api)
    return [_summary(j, "Job") for j in wire.items(found)]


@operation("training_job_list", method="GET", path="/training/jobs", example={})
async def training_job_list(ctx: CallContext, req: JobsRequest) -> JobList:
    """Training jobs of both paths in one shape, newest first: HyperPodPyTorchJobs and KubeRay RayJobs, with
    state, nodes, instance type, restarts, recipe. Read-only; served from the cluster's watches (`watch` says how
    fresh; stale with its age while a watch is down); job_get_status has the detail."""
    row = await _row(ctx.app, req.cluster_tag)
    return await watched_training(ctx.app, row, req.namespace)


@operation("job_list_all", method="GET", path="/jobs", example={})
async def job_list_all(ctx: CallContext, req: JobsRequest) -> JobList:
    """Every job of the cluster in one shape: HyperPodPyTorchJobs, RayJobs and Kubernetes batch Jobs (model
    downloads and the like), newest first. Read-only."""
    row = await _row(ctx.app, req.cluster_tag)
    found = await watched_training(ctx.app, row, req.namespace)
    batch = await blocking(list_batch, ctx.app, row)
    jobs = found.jobs + [j for j in batch if req.namespace in (None, j.namespace)]
    jobs.sort(key=lambda j: (j.created_at or "", j.name), reverse=True)
    return found.model_copy(update={"jobs": jobs, "count": len(jobs)})


class JobRef(WireModel):
    """One training job."""

    job_name: str = Field(pattern=JOB_NAME)
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class BudgetUse(WireModel):
    """Restarts used of the recovery budget."""

    restarts: int = Field(description="Restarts so far (in place and full).")
    job_max_retry_count: int
    full_job_restarts: int
    max_full_job_restarts: int | None
    in_place_restarts: int


class JobStatus(WireModel):
    """A training job in detail."""

    job: JobSummary
    conditions: list[dict[str, Any]]
    run_policy: dict[str, Any] = Field(description="The recovery budget as submitted.")
    budget: BudgetUse
    pods: list[JobPod]
    image: str | None
    command: list[str]
    source: str = Field(default="direct", description=watched.SOURCE_HELP)
    watch: WatchFreshness | None = Field(default=None, description="How current the watched job and pods are.")
    note: str | None = Field(default=None, description="Why the answer was read directly, or how stale it is.")
    network: NetworkUse | None = Field(default=None, description="Multi-node jobs: does NCCL use EFA? (pod logs)")
    queue: QueueState | None = Field(default=None, description="A job in a Kueue queue (task governance): pending "
                                     "over quota, admitted, running on borrowed capacity, or preempted and requeued, "
                                     "with why.")


def _pods(api: Api, name: str, namespace: str) -> list[JobPod]:
    found = kube_call("list the job's pods", core_kinds.list_pods, api, namespace,
                      label_selector=f"{training_manifests.POD_JOB_LABEL}={name}")
    return sorted((job_pod(p) for p in wire.items(found)), key=lambda p: p.name)


def read_job(app: AppContext, row: ClusterRow, name: str, namespace: str) -> tuple[dict[str, Any], list[JobPod]]:
    """The job object and its pods read directly (blocking); NotFound lists the jobs that exist."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    try:
        obj = kube_call(
            "read the HyperPodPyTorchJob",
            custom_objects.get_custom,
            api,
            training_manifests.GROUP,
            training_manifests.VERSION,
            namespace,
            training_manifests.PLURAL,
            name,
        )
    except NotFound:
        ray = ray_jobs.read_ray(api, name, namespace)
        if ray is not None:
            return ray
        names = [
            f"{o['metadata']['namespace']}/{o['metadata']['name']}"
            for o in [*_custom(api, None), *ray_jobs.list_ray(api, None)]
        ]
        raise NotFound(
            f"No training job {namespace}/{name}.", hint=f"Jobs here: {', '.join(names) or 'none'} (training_job_list)."
        ) from None
    return obj, _pods(api, name, namespace)


@operation("job_get_status", method="GET", path="/training/jobs/status", example={"jobName": "missing-job"})
async def job_get_status(ctx: CallContext, req: JobRef) -> JobStatus:
    """One training job (HyperPodPyTorchJob or RayJob): state, conditions, the recovery budget as submitted and
    the restarts used of it (in place and full), and its pods with node and phase. Read-only; served from the
    cluster's watches (`watch` says how fresh; stale with its age while a watch is down). For a multi-node job,
    `network` says whether NCCL chose EFA (NET/OFI) or TCP sockets (NET/Socket) in its pods' logs, with a
    warning when it runs without EFA. For a job in a task governance queue, `queue` says whether Kueue admitted it
    within its team's quota, on capacity borrowed from other teams, keeps it pending over quota, or preempted and
    requeued it, and why (from its Workload's conditions)."""
    row = await _row(ctx.app, req.cluster_tag)
    got = await watched.from_watches(
        ctx.app, row, job_watch.JOB_STATUS_KINDS, partial(job_watch.job_in_watches, req.job_name, req.namespace),
        partial(read_job, ctx.app, row, req.job_name, req.namespace),
        missing=f"{req.namespace}/{req.job_name} is not in the watches (yet)")
    obj, pods = got.value
    if obj.get("kind") == ray_job.KIND:
        return _ray_status(obj, pods).model_copy(update={"source": got.source, "watch": got.watch, "note": got.note})
    policy = (obj.get("spec") or {}).get("runPolicy") or {}
    status = obj.get("status") or {}
    restarts = int(status.get("restartCount") or 0)
    full = int((status.get("restartStatus") or {}).get("fullJobRestartCount") or 0)
    specs = (obj.get("spec") or {}).get("replicaSpecs") or [{}]
    containers = (((specs[0].get("template") or {}).get("spec") or {}).get("containers")) or [{}]
    return JobStatus(
        job=_summary(obj, training_manifests.KIND), conditions=list(status.get("conditions") or []), run_policy=policy,
        budget=BudgetUse(restarts=restarts, job_max_retry_count=int(policy.get("jobMaxRetryCount") or 0),
                         full_job_restarts=full,
                         max_full_job_restarts=(policy.get("restartPolicy") or {}).get("maxFullJobRestarts"),
                         in_place_restarts=max(restarts - full, 0)),
        pods=pods, image=containers[0].get("image"), command=list(containers[0].get("command") or []),
        source=got.source, watch=got.watch, note=got.note,
        network=await blocking(network_use, ctx.app, row, obj, pods, req.namespace),
        queue=await blocking(queue_state, ctx.app, row, obj),
    )


def _ray_status(obj: dict[str, Any], pods: list[JobPod]) -> JobStatus:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    policy = {k: spec[k] for k in ("backoffLimit", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished",
                                   "activeDeadlineSeconds") if k in spec}
    failed = int(status.get("failed") or 0)
    conditions = [{"type": "JobDeploymentStatus", "status": str(status.get("jobDeploymentStatus") or ""),
                   "message": str(status.get("message") or ""), "reason": str(status.get("reason") or "")},
                  {"type": "JobStatus", "status": str(status.get("jobStatus") or "")}]
    head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or [{}]
    return JobStatus(
        job=ray_jobs.ray_summary(obj), conditions=conditions, run_policy=policy,
        budget=BudgetUse(restarts=failed, job_max_retry_count=int(spec.get("backoffLimit") or 0),
                         full_job_restarts=failed, max_full_job_restarts=None, in_place_restarts=0),
        pods=pods, image=containers[0].get("image"), command=shlex.split(str(spec.get("entrypoint") or "")),
    )


class LogsRequest(JobRef):
    """Which pod of the job (default the first, rank 0) and how much of its log."""

    pod: str | None = Field(default=None, pattern=JOB_NAME, description="Default: the job's first pod.")
    tail: int = Field(default=100, ge=1, le=500, description="Last N lines (1-500).")
    since_seconds: int | None = Field(default=None, ge=1, le=86400)


class JobLogs(WireModel):
    """A bounded tail of one pod's training container, from the pod or, once it is gone, from CloudWatch."""

    job_name: str
    pod: str
    pods: list[str]
    lines: list[str]
    truncated: bool
    source: str = Field(default="pods", description="Where the lines came from: pods (the live or finished pod's "
                        "log) or cloudwatch (the observability add-on's copy, after the pod was deleted).")
    log_group: str | None = Field(default=None, description="The CloudWatch log group read (source cloudwatch).")


@operation("training_job_logs", method="GET", path="/training/jobs/logs", example={"jobName": "missing-job"})
async def training_job_logs(ctx: CallContext, req: LogsRequest) -> JobLogs:
    """The last `tail` (≤500) lines, at most 64 KiB, of one pod of a training job (default its first pod);
    `pods` names the others. Once the pods are gone (cleanPodPolicy All, deleted, or the job's TTL passed) and
    observability logging is on, the lines come from the cluster's CloudWatch log group (`source` says which).
    Read-only."""
    row = await _row(ctx.app, req.cluster_tag)
    missing: NotFound | None = None
    obj: dict[str, Any] = {}
    pods: list[JobPod] = []
    try:
        obj, pods = await blocking(read_job, ctx.app, row, req.job_name, req.namespace)
    except NotFound as gone:  # the job itself may be gone (its TTL): CloudWatch may still have its lines
        missing = gone
    names = [p.name for p in pods]
    pod = req.pod or (names[0] if names else None)
    if pod is None or pod not in names:
        container = (
            training_manifests.CONTAINER
            if obj.get("kind", training_manifests.KIND) == training_manifests.KIND
            else ray_job.HEAD_CONTAINER
        )
        found = await blocking(job_logs.shipped, ctx.app, row, req.job_name, req.namespace, container, req.pod,
                               req.tail)
        if found is not None:
            return JobLogs(job_name=req.job_name, pod=found.pod, pods=found.pods, lines=found.lines,
                           truncated=found.truncated, source="cloudwatch", log_group=found.group)
        if missing is not None:
            raise missing
        if not names:
            raise NotFound(f"Training job {req.namespace}/{req.job_name} has no pods now, and no copy of their logs "
                           "in CloudWatch.",
                           hint="job_get_status shows its state. Jobs keep their pods by default (cleanPodPolicy "
                           "None); with observability logging on (hyperpod_update_advanced_features "
                           '{"observability": {"enabled": true, "logging": true}}) the lines outlive the pods.')
        raise NotFound(f"{pod} is not a pod of {req.job_name}.", hint=f"Its pods: {', '.join(names)}.")
    container_name = (
        training_manifests.CONTAINER if obj.get("kind") == training_manifests.KIND else None
    )  # a Ray pod has one container
    logs = PodLogsRequest(cluster_tag=row.tag, namespace=req.namespace, pod_name=pod, container=container_name,
                          tail_lines=req.tail, since_seconds=req.since_seconds)
    lines, truncated = await blocking(read_log, ctx.app, row, logs)
    return JobLogs(job_name=req.job_name, pod=pod, pods=names, lines=lines, truncated=truncated)
