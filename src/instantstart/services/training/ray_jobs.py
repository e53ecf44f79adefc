"""ray_job_submit: Ray-native training (VERL and the like) as a KubeRay RayJob on HyperPod nodes; its reads."""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import NotFound
from instantstart.kube import core_kinds, custom_objects, wire
from instantstart.kube.apply import apply_object, delete_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import ray_job as ray_job_manifests
from instantstart.manifests import training as training_manifests
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.fsx_claims import mountable_fsx
from instantstart.services.base.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.core import sizing
from instantstart.services.teams.placement import in_team_namespace
from instantstart.services.training import checks
from instantstart.services.training.env import ENV_DESCRIPTION, EnvEntry, spec_env
from instantstart.services.training.models import JobPod, JobSummary, job_pod
from instantstart.services.training.submit import JobParams, MlflowUse, apply_stage, mlflow_env
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName

KIND = "ray_job_submit"
SHELL_OPERATORS = (";", "&&", "||", "|", ">", "<", "`", "$(")
SUBMITTER_LABEL = ray_job_manifests.SUBMITTER_LABEL


class RayJobRequest(WireModel):
    """A Ray job: the image, the entrypoint the submitter runs, and the GPU workers it gets."""

    job_name: str = Field(min_length=1, max_length=63, description="A DNS label: names the RayJob and its cluster.")
    image: str = Field(min_length=3, max_length=512, pattern=r"^[^\s]+$",
                       description="A Ray image with the framework (e.g. VERL) installed; head and workers use it.")
    entrypoint: str = Field(min_length=1, max_length=4000,
                            description="What the submitter runs on the cluster, e.g. "
                            "`python3 -m verl.trainer.main_ppo trainer.nnodes=2`; arguments only, no shell operators.")
    instance_type: str = Field(min_length=3, max_length=64, description="Workers' instance type (it must have nodes).")
    nodes: int = Field(default=1, ge=1, le=256, description="GPU worker pods, one per node.")
    gpus_per_node: int | None = Field(default=None, ge=0, le=64,
                                      description="GPUs (Neuron devices on trn) each worker requests (default: all "
                                      "of the type's).")
    efa: bool | None = Field(default=None, description="Workers' EFA interfaces and libfabric env: default on for "
                             "several workers on an EFA type; false turns it off explicitly.")
    env: dict[str, EnvEntry] = Field(default_factory=dict, max_length=64, description=ENV_DESCRIPTION)
    mlflow: MlflowUse | None = Field(default=None, description="Track the job in MLflow (mlflow_configure first): "
                                     "the head and workers get MLFLOW_TRACKING_URI (the tracking server ARN), "
                                     "MLFLOW_EXPERIMENT_NAME, MLFLOW_RUN_NAME and the writer service account.")
    retries: int = Field(default=0, ge=0, le=10, description="backoffLimit: new attempts after a failed run.")
    active_deadline_seconds: int | None = Field(default=None, ge=60, le=30 * 86400)
    s3_claim: str | None = Field(
        default="s3-claim", description=f"Claim mounted at {training_manifests.S3_MOUNT} when present."
    )
    fsx_claim: KubeName | None = Field(default=None, description="An FSx for Lustre claim of the namespace "
                                       "(fsx_storage_create) mounted read-write at /fsx on the head and workers; "
                                       "required when the entrypoint uses /fsx.")
    pod_annotations: dict[str, str] = Field(default_factory=dict, max_length=32)
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


def entry_words(entrypoint: str) -> list[str]:
    """The entrypoint as an argument list; shell operators are refused (nothing is run through a shell)."""
    words = checks.split_words("entrypoint", entrypoint)
    bad = sorted({op for op in SHELL_OPERATORS for w in words if op in w})
    if bad:
        raise checks.field_error("entrypoint", f"contains the shell operator(s) {' '.join(bad)}",
                                 "Give one command and its arguments; put pipelines in a script under /s3.")
    return words


def check_ray_cluster(app: AppContext, row: ClusterRow, name: str, namespace: str, claim: str | None,
                      needs_claim: bool) -> str | None:
    """Blocking: KubeRay serves RayJob, the name is free, the S3 claim exists when needed; the claim to mount."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    checks.check_operator_and_name(
        api,
        row,
        crd=ray_job_manifests.CRD,
        api_version=ray_job_manifests.API_VERSION,
        kind=ray_job_manifests.KIND,
        name=name,
        namespace=namespace,
        operator="KubeRay operator",
        feature="kuberayOperator",
    )
    return checks.claim_to_mount(api, namespace, claim, needs_claim)


async def submit_ray(ctx: CallContext, req: RayJobRequest, entry: list[str], *, recipe: str | None = None,
                     needs_claim: bool = False) -> OperationRef:
    """Refuse what cannot run, render the RayJob, record the submission."""
    checks.check_name(req.job_name)
    facts = checks.facts_of(req.instance_type)
    # Workers leave room for the head, which runs on the same instance type and may share a node with one.
    worker = sizing.pod_resources(
        facts,
        accelerators_per_pod=sizing.accelerators(facts, req.gpus_per_node),
        nodes=req.nodes,
        efa=req.efa,
        beside=(ray_job_manifests.HEAD_CPU, ray_job_manifests.HEAD_MEMORY_GIB),
    )
    needs_claim = needs_claim or any(
        w == training_manifests.S3_MOUNT
        or w.startswith(training_manifests.S3_MOUNT + "/")
        or f"={training_manifests.S3_MOUNT}/" in w
        for w in entry
    )
    tag = await blocking(resolve_tag, ctx.app.db, req.cluster_tag)
    req = await in_team_namespace(ctx, tag, req)  # a member's Ray job goes to (only) their team's namespace
    row = await blocking(get_cluster, ctx.app.db, tag)
    env, service_account = spec_env(req.env), None
    if req.mlflow is not None:
        env, service_account = await blocking(mlflow_env, ctx.app.db, tag, req.mlflow, req.job_name, req.namespace,
                                              env)
    await checks.check_capacity(ctx.app, row, req.instance_type, False)
    claim = await blocking(check_ray_cluster, ctx.app, row, req.job_name, req.namespace, req.s3_claim, needs_claim)
    fsx = await blocking(mountable_fsx, ctx.app, row, req.namespace, req.fsx_claim, [*entry, *req.env.values()],
                         "entrypoint")
    spec = ray_job_manifests.RayJobSpec(
        name=req.job_name, namespace=req.namespace, image=req.image, entrypoint=entry, workers=req.nodes,
        worker=worker, instance_type=req.instance_type, env=env, s3_claim=claim, fsx_claim=fsx, recipe=recipe,
        pod_annotations=dict(req.pod_annotations), backoff_limit=req.retries,
        active_deadline_seconds=req.active_deadline_seconds, service_account=service_account,
    )
    params = JobParams(cluster_tag=tag, region=row.region, eks_cluster=row.eks_cluster_name, name=spec.name,
                       namespace=spec.namespace, body=ray_job_manifests.ray_job(spec))
    return await submit_for_cluster(ctx, KIND, tag, params, status_tool="job_get_status", poll_after_seconds=10,
                                    workload=(spec.namespace, spec.name))


@operation(
    "ray_job_submit",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/training/ray-jobs",
    completion="job_get_status",
    example={"jobName": "rl", "image": "example/ray:1", "entrypoint": "python3 train.py",
             "instanceType": "ml.g6.4xlarge"},
)
async def ray_job_submit(ctx: CallContext, req: RayJobRequest) -> OperationRef:
    """Submit a KubeRay RayJob: its own Ray cluster (a CPU head and `nodes` GPU workers on `instanceType`, each
    worker sized from the instance-type catalog with room left for the head, EFA and its libfabric env when there
    are several workers on an EFA type, unless `efa` is false; the cluster's S3 claim at /s3), the `entrypoint` run
    by the submitter, the cluster removed when the job ends. Its Ray ports are reachable only from its own pods
    (NetworkPolicy <jobName>-ray; the dashboard also from the submitter and the KubeRay operator).
    Refused before submitting: KubeRay not enabled (hint: the feature key), a name that is not a DNS label, more
    GPUs than the type has, a type with no nodes, shell operators in the entrypoint. job_get_status,
    training_job_logs and training_job_delete take its name like any training job."""
    return await submit_ray(ctx, req, entry_words(req.entrypoint))


def _apply(stage: StageContext, p: JobParams) -> dict[str, Any]:
    api = kube_api(stage.app.kube, p.eks_cluster, p.region)
    # The policy before the RayJob (no pod of its Ray cluster is ever unfenced), then owned by it (gone with it).
    kube_call(
        "apply the Ray cluster's NetworkPolicy",
        apply_object,
        api,
        ray_job_manifests.network_policy(p.name, p.namespace),
    )
    applied = kube_call("apply the RayJob", apply_object, api, p.body)
    uid = (applied.get("metadata") or {}).get("uid")
    kube_call(
        "own the Ray cluster's NetworkPolicy",
        apply_object,
        api,
        ray_job_manifests.network_policy(p.name, p.namespace, uid),
    )
    return {"uid": uid}


KINDS.register(OperationKind(name=KIND, params=JobParams,
                             stages=(StageSpec("apply", apply_stage(_apply), max_attempts=3),),
                             result_from=lambda outputs: outputs.get("apply", {})))


# -- reads shared with the training job tools ------------------------------------------------------
def ray_state(obj: dict[str, Any]) -> str:
    """The job's state in the training tools' words, from jobDeploymentStatus and jobStatus."""
    status = obj.get("status") or {}
    deployment, job = status.get("jobDeploymentStatus"), status.get("jobStatus")
    if deployment == "Complete" and job == "SUCCEEDED":
        return "Completed"
    if deployment in ("Complete", "Failed") or job in ("FAILED", "STOPPED"):
        return "Failed"
    return {"Retrying": "Restarting", "Running": "Running", "Initializing": "Created"}.get(str(deployment), "Pending")


def ray_summary(obj: dict[str, Any]) -> JobSummary:
    """A RayJob in the shape of every training job (nodes = GPU workers)."""
    meta = obj.get("metadata") or {}
    groups = ((obj.get("spec") or {}).get("rayClusterSpec") or {}).get("workerGroupSpecs") or []
    tmpl = ((groups[0].get("template") or {}).get("spec") or {}) if groups else {}
    return JobSummary(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace")),
        kind=ray_job_manifests.KIND,
        state=ray_state(obj),
        nodes=sum(int(g.get("replicas") or 0) for g in groups),
        instance_type=(tmpl.get("nodeSelector") or {}).get(INSTANCE_TYPE_LABEL),
        restart_count=int((obj.get("status") or {}).get("failed") or 0),
        recipe=(meta.get("labels") or {}).get(training_manifests.LABEL_RECIPE),
        created_at=meta.get("creationTimestamp"),
    )


def list_ray(api: Api, namespace: str | None) -> list[dict[str, Any]]:
    """RayJobs (none when KubeRay is not installed)."""
    try:
        out = kube_call("list RayJobs", custom_objects.list_custom, api, ray_job_manifests.GROUP,
                        ray_job_manifests.VERSION, ray_job_manifests.PLURAL, namespace or None)
    except NotFound:
        return []
    return list(out.get("items") or [])


def ray_pods(api: Api, name: str, namespace: str, cluster: str | None) -> list[JobPod]:
    """The pods of a RayJob: its Ray cluster's head and workers, and the submitter Job's pod."""
    selectors = [f"{SUBMITTER_LABEL}={name}"]
    if cluster:
        selectors.insert(0, f"{ray_job_manifests.CLUSTER_LABEL}={cluster}")
    pods: list[JobPod] = []
    for selector in selectors:
        found = kube_call("list the Ray job's pods", core_kinds.list_pods, api, namespace, label_selector=selector)
        pods += [job_pod(p) for p in wire.items(found)]
    return pods


def read_ray(api: Api, name: str, namespace: str) -> tuple[dict[str, Any], list[JobPod]] | None:
    """The RayJob and its pods, or None when there is no such RayJob."""
    try:
        obj = kube_call(
            "read the RayJob",
            custom_objects.get_custom,
            api,
            ray_job_manifests.GROUP,
            ray_job_manifests.VERSION,
            namespace,
            ray_job_manifests.PLURAL,
            name,
        )
    except NotFound:
        return None
    return obj, ray_pods(api, name, namespace, wire.status(obj).get("rayClusterName"))


def delete_ray(api: Api, name: str, namespace: str, cluster: str | None) -> tuple[int, str | None]:
    """Delete the RayJob if it is still there (its Ray cluster and pods follow): (pods left, Ray cluster name)."""
    found = read_ray(api, name, namespace)
    if found is not None:
        cluster = wire.status(found[0]).get("rayClusterName") or cluster
        with contextlib.suppress(NotFound):
            kube_call(
                "delete the RayJob",
                custom_objects.delete_custom,
                api,
                ray_job_manifests.GROUP,
                ray_job_manifests.VERSION,
                namespace,
                ray_job_manifests.PLURAL,
                name,
                propagation_policy="Background",
            )
    # Owned by the RayJob, so the garbage collector removes it too; deleted here as well for one left by a RayJob
    # apply that failed after the policy's.
    kube_call(
        "delete the Ray cluster's NetworkPolicy", delete_object, api, ray_job_manifests.network_policy(name, namespace)
    )
    return len(ray_pods(api, name, namespace, cluster)), cluster
