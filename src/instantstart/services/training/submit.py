"""training_job_submit: a HyperPodPyTorchJob launched through hyperpodrun, with its recovery budget explicit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import PreconditionFailed
from instantstart.kube.apply import apply_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import training as training_manifests
from instantstart.manifests.env import EnvValue
from instantstart.operations.kinds import KINDS, OperationKind, StageFn, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.fsx_claims import mountable_fsx
from instantstart.services.base.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.teams import placement
from instantstart.services.training import checks, inputs, scheduling
from instantstart.services.training.env import ENV_DESCRIPTION, EnvEntry, spec_env
from instantstart.services.training.mlflow import mlflow_config
from instantstart.store.db import Database
from instantstart.validation import ClusterTag, KubeName

KIND = "training_job_submit"
TTL_SECONDS = 7 * 86400
LAUNCHERS = ("torchrun", "hyperpodrun", "python -m torch.distributed.run")


class RecoveryBudget(WireModel):
    """runPolicy: how many times the operator restarts the job, in place first, then in full."""

    job_max_retry_count: int = Field(default=5, ge=0, le=100, description="Restarts in all before the job fails.")
    num_restart_before_full_job_restart: int = Field(default=3, ge=0, le=100,
                                                     description="In-place pod restarts before a full job restart.")
    eval_period_seconds: int = Field(default=21600, ge=60, le=7 * 86400,
                                     description="The window restarts are counted in.")
    max_full_job_restarts: int = Field(default=1, ge=0, le=100)
    clean_pod_policy: Literal["All", "Running", "None"] = Field(
        default="None", description="Which pods are deleted when the job finishes. None (default, as the HyperPod "
        "templates) keeps them so training_job_logs can still read them; All deletes them and their logs.")
    ttl_seconds_after_finished: int = Field(
        default=TTL_SECONDS, ge=60, le=90 * 86400, description="The finished job and its pods are deleted this "
        "long after it ends (default 7 days); with observability logging on, the lines stay in CloudWatch.")


class HangMonitor(WireModel):
    """Hang detection from the logs: the operator restarts a pod whose log stops matching `logPattern`."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
                      description="Names the monitor in events and conditions.")
    log_pattern: str = Field(min_length=1, max_length=512,
                             description="A regular expression a healthy job's log keeps matching, e.g. "
                             r"`.*step (\d+).*` (at most one capture group, a number).")
    expected_start_cut_off_in_seconds: int | None = Field(
        default=None, ge=1, le=7 * 86400, description="The first match must come within this many seconds.")
    expected_recurring_frequency_in_seconds: int | None = Field(
        default=None, ge=1, le=7 * 86400, description="At most this many seconds between two matches.")
    stop_pattern: str | None = Field(default=None, min_length=1, max_length=512,
                                     description="After a line matching this, the monitor stops (e.g. the end "
                                     "of training).")


class Elastic(WireModel):
    """Elastic training: the job runs with any node count in [minReplicas, maxReplicas] (never on Spot)."""

    min_replicas: int = Field(ge=1, le=256)
    max_replicas: int = Field(ge=1, le=256)


class MlflowUse(WireModel):
    """Log the job's runs to the cluster's MLflow tracking server (mlflow_configure first)."""

    experiment: str = Field(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f]+$",
                            description="The MLflow experiment the job's runs go to (created when absent).")


class JobShape(WireModel):
    """Where and how big a training job is, its budget and environment (shared by jobs and recipes)."""

    job_name: str = Field(min_length=1, max_length=253, description="A DNS label: names the job and its pods.")
    instance_type: str = Field(default="", max_length=64,
                               description="An instance type with nodes in the cluster (default: the cluster's one "
                               "accelerated type; refused, naming them, when it has several).")
    nodes: int = Field(default=1, ge=1, le=256, description="Pods, one per node.")
    gpus_per_node: int | None = Field(default=None, ge=0, le=64,
                                      description="GPUs (Neuron devices on trn types) each pod requests "
                                      "(default: all of the type's).")
    efa: bool | None = Field(default=None, description="EFA interfaces and the libfabric/NCCL env: default on for "
                             "multi-node jobs on EFA types, off for one node; false turns it off explicitly.")
    vcpu: float | None = Field(default=None, gt=0, le=512, description="vCPUs each pod requests (default: its "
                               "share of the node after system reservations).")
    memory_gib: float | None = Field(default=None, gt=0, le=8192, alias="memoryGiB",
                                     description="Memory (GiB) each pod requests (default: its share of the node "
                                     "after system reservations).")
    nproc_per_node: str = Field(default="auto", max_length=8, description="auto, cpu, gpu or a number.")
    env: dict[str, EnvEntry] = Field(default_factory=dict, max_length=64, description=ENV_DESCRIPTION)
    recovery: RecoveryBudget = Field(default_factory=RecoveryBudget)
    elastic: Elastic | None = None
    hang_detection: list[HangMonitor] = Field(
        default_factory=list, max_length=8,
        description="Log-pattern hang detection (runPolicy.logMonitoringConfiguration): a pod whose log misses "
        "a deadline counts as failed and is restarted within the recovery budget.")
    queue_name: KubeName | None = Field(default=None, description="Task governance: the Kueue LocalQueue "
                                        "in the job's namespace (label kueue.x-k8s.io/queue-name).")
    priority: KubeName | None = Field(default=None, description="Task governance: a Kueue WorkloadPriorityClass "
                                      "(label kueue.x-k8s.io/priority-class).")
    topology: scheduling.Topology | None = Field(default=None, description="Topology-aware scheduling: the "
                                                 "podset's preferred or required EC2 topology domain.")
    s3_claim: str | None = Field(
        default="s3-claim", description=f"Claim mounted at {training_manifests.S3_MOUNT} when present."
    )
    fsx_claim: KubeName | None = Field(default=None, description="An FSx for Lustre claim of the job's namespace "
                                       "(fsx_storage_create) mounted read-write at /fsx; required when the command "
                                       "uses /fsx. Claims InstantStart did not create are refused.")
    pod_annotations: dict[str, str] = Field(default_factory=dict, max_length=32)
    mlflow: MlflowUse | None = Field(default=None, description="Track the job in MLflow: the pods get "
                                     "MLFLOW_TRACKING_URI (the tracking server ARN), MLFLOW_EXPERIMENT_NAME, "
                                     "MLFLOW_RUN_NAME and the service account allowed to write to the server.")
    namespace: KubeName = Field(default="default", description="Default: the namespace of the caller's team on the "
                                "cluster (hyperpod-ns-<team>, whose queue the job then joins), else default.")
    cluster_tag: ClusterTag | None = None


J = TypeVar("J", bound=JobShape)


class JobRequest(JobShape):
    """A PyTorch training job: the image and the entry point hyperpodrun launches."""

    image: str = Field(min_length=3, max_length=512, pattern=r"^[^\s]+$",
                       description="Must contain hyperpod-elastic-agent (the hyperpodrun launcher).")
    command: str = Field(min_length=1, max_length=4000,
                         description="The entry point and its arguments, e.g. `train.py --epochs 3`; launched as "
                         "`hyperpodrun --nnodes=N --nproc-per-node=P <command>`, never torchrun.")


class JobParams(ParamsModel):
    """What a submission records: the rendered job, HyperPodPyTorchJob or RayJob (no secrets in it)."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    body: dict[str, Any]


def entry_words(command: str) -> list[str]:
    """The entry point as an argument list; a launcher in it is refused (hyperpodrun is added)."""
    words = checks.split_words("command", command)
    joined = " ".join(words[:3])
    for launcher in LAUNCHERS:
        if joined == launcher or joined.startswith(launcher + " ") or words[0] == launcher:
            raise checks.field_error(
                "command", f"starts with the launcher {launcher!r}",
                "Give only the script and its arguments (e.g. `train.py --epochs 3`): the job runs it through "
                "hyperpodrun with --nnodes and --nproc-per-node set from nodes and nprocPerNode.",
            )
    if words and words[0] in ("python", "python3"):
        words = words[1:]
    if not words:
        raise checks.field_error("command", "no entry point", "Name the training script, e.g. train.py.")
    return words


async def submit_job(ctx: CallContext, shape: JobShape, image: str, entry: list[str], *,
                     recipe: str | None = None, needs_claim: bool = False,
                     files: dict[str, str] | None = None) -> OperationRef:
    """Refuse what cannot run, render the job, record the submission; `files` (field → path under /s3) must
    exist in the S3 claim's bucket."""
    checks.check_name(shape.job_name)
    checks.check_nproc(shape.nproc_per_node)
    resources = checks.pod_resources(shape)
    if shape.elastic and shape.elastic.min_replicas > shape.elastic.max_replicas:
        raise checks.field_error("elastic", "minReplicas is above maxReplicas", "Set minReplicas <= maxReplicas.")
    needs_claim = needs_claim or any(
        w == training_manifests.S3_MOUNT or w.startswith(training_manifests.S3_MOUNT + "/") for w in entry
    )
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, shape.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    shape = await placed(ctx, tag, shape)
    env, service_account = spec_env(shape.env), None
    if shape.mlflow is not None:
        env, service_account = await to_thread.run_sync(mlflow_env, ctx.app.db, tag, shape.mlflow, shape.job_name,
                                                        shape.namespace, env)
    await checks.check_capacity(ctx.app, row, shape.instance_type, shape.elastic is not None)
    claim = await blocking(checks.check_cluster, ctx.app, row, shape.job_name, shape.namespace, shape.s3_claim,
                           needs_claim)
    await blocking(inputs.check_files, ctx.app, row, shape.namespace, claim, files or {})
    fsx = await blocking(mountable_fsx, ctx.app, row, shape.namespace, shape.fsx_claim,
                         [*entry, *shape.env.values()])
    sched = scheduling.scheduling(shape.queue_name, shape.priority, shape.topology)
    await blocking(scheduling.check_scheduling, ctx.app, row, shape.namespace, sched)
    r = shape.recovery
    spec = training_manifests.JobSpec(
        name=shape.job_name,
        namespace=shape.namespace,
        image=image,
        entry=entry,
        nodes=shape.nodes,
        nproc_per_node=shape.nproc_per_node,
        resources=resources,
        instance_type=shape.instance_type,
        env=env,
        s3_claim=claim,
        fsx_claim=fsx,
        recipe=recipe,
        pod_annotations=dict(shape.pod_annotations),
        scheduling=sched,
        service_account=service_account,
        run_policy=training_manifests.RunPolicy(
            r.job_max_retry_count,
            r.num_restart_before_full_job_restart,
            r.eval_period_seconds,
            r.max_full_job_restarts,
            r.clean_pod_policy,
            checks.hang_monitors(shape.hang_detection),
            r.ttl_seconds_after_finished,
        ),
        elastic=(shape.elastic.min_replicas, shape.elastic.max_replicas) if shape.elastic else None,
    )
    params = JobParams(cluster_tag=tag, region=row.region, eks_cluster=row.eks_cluster_name, name=spec.name,
                       namespace=spec.namespace, body=training_manifests.job(spec))
    return await submit_for_cluster(ctx, KIND, tag, params, status_tool="job_get_status", poll_after_seconds=10,
                                    workload=(spec.namespace, spec.name))


async def placed(ctx: CallContext, tag: str, shape: J) -> J:
    """The job with its team's namespace and queue filled in (`services/teams/placement.py`)."""
    namespace, queue = await to_thread.run_sync(
        placement.place, ctx.app.db, ctx.principal, tag,
        shape.namespace if "namespace" in shape.model_fields_set else None, shape.queue_name)
    return shape.model_copy(update={"namespace": namespace, "queue_name": queue})


def mlflow_env(db: Database, tag: str, use: MlflowUse, job_name: str, namespace: str,
               env: dict[str, EnvValue]) -> tuple[dict[str, EnvValue], str]:
    """The job's env with the MLflow variables, and the service account bound to the tracking server's writer
    role; refused when mlflow_configure has not run for the cluster (or for another namespace). Both paths."""
    config = mlflow_config(db, tag)
    if config is None:
        raise PreconditionFailed(
            f"mlflow: MLflow is not configured for cluster {tag}, so job {job_name} has nowhere to log.",
            hint=f"Run mlflow_configure (clusterTag {tag}) first, or leave mlflow out.")
    if config["namespace"] != namespace:
        raise checks.field_error(
            "namespace", f"MLflow writers are set up in namespace {config['namespace']}, not {namespace}",
            f"Submit in namespace {config['namespace']}, or run mlflow_configure with namespace {namespace}.")
    return {**env, "MLFLOW_TRACKING_URI": str(config["trackingServerArn"]), "MLFLOW_EXPERIMENT_NAME": use.experiment,
            "MLFLOW_RUN_NAME": job_name}, str(config["serviceAccount"])


@operation(
    "training_job_submit",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/training/jobs",
    completion="job_get_status",
    example={"jobName": "demo", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge"},
)
async def training_job_submit(ctx: CallContext, req: JobRequest) -> OperationRef:
    """Submit a HyperPodPyTorchJob: `nodes` pods on `instanceType`, each requesting gpusPerNode GPUs (Neuron devices on
    trn; default all), cpu/memory sized to its share of the node, and on multi-node EFA types every EFA interface plus
    the libfabric env (`efa: false` turns that off); the entry `command` launched through hyperpodrun (never
    torchrun), the cluster's S3 claim mounted at /s3 and, when fsxClaim names one InstantStart created, an FSx claim
    at /fsx. The recovery budget is explicit (default jobMaxRetryCount 5, numRestartBeforeFullJobRestart 3,
    evalPeriodSeconds 21600, maxFullJobRestarts 1, cleanPodPolicy None so finished pods and their logs stay,
    ttlSecondsAfterFinished 7 days); job_get_status shows it back with the restarts used. Refused before submitting: a
    name that is not a DNS label, more accelerators, vCPUs or memory than a node gives, a type with no nodes (the
    message lists the groups), the training operator not enabled, elastic on Spot."""
    words = entry_words(req.command)
    req = req.model_copy(update={"instance_type": await default_instance_type(ctx, req)})
    return await submit_job(ctx, req, req.image, words)


async def default_instance_type(ctx: CallContext, shape: JobShape) -> str:
    """The job's instanceType, or the cluster's only accelerated one when it was left out."""
    if shape.instance_type:
        return shape.instance_type
    row = await to_thread.run_sync(get_cluster, ctx.app.db, await to_thread.run_sync(resolve_tag, ctx.app.db,
                                                                                     shape.cluster_tag))
    return await checks.instance_type_or_default(ctx.app, row, shape.instance_type)


def _apply(stage: StageContext, p: JobParams) -> dict[str, Any]:
    api = kube_api(stage.app.kube, p.eks_cluster, p.region)
    applied = kube_call("apply the HyperPodPyTorchJob", apply_object, api, p.body)
    return {"uid": (applied.get("metadata") or {}).get("uid")}


def apply_stage(apply: Callable[[StageContext, JobParams], dict[str, Any]]) -> StageFn:
    """The apply stage of both training paths: server-side apply the recorded job with `apply` (which returns its
    uid; a rerun re-applies the same object)."""

    async def stage_apply(stage: StageContext) -> dict[str, Any]:
        p = stage.params_as(JobParams)
        await stage.progress(f"applying {p.body['kind']} {p.namespace}/{p.name}")
        out = await blocking(apply, stage, p)
        return {"jobName": p.name, "namespace": p.namespace, "uid": out["uid"], "statusTool": "job_get_status"}

    return stage_apply


KINDS.register(OperationKind(name=KIND, params=JobParams,
                             stages=(StageSpec("apply", apply_stage(_apply), max_attempts=3),),
                             result_from=lambda outputs: outputs.get("apply", {})))
