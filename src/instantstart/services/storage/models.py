"""Model downloads into an S3 or FSx claim: a CPU-only Job per model and revision, its progress, and the manifests."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws import identity, s3
from instantstart.catalog import operation
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, ProviderError
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import apply_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api, api_failure
from instantstart.manifests import model_download as md
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL
from instantstart.manifests.resources import GPU, NEURON
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.fsx_claims import check_fsx_claim
from instantstart.services.core.instance_types import catalog
from instantstart.services.storage import model_token as token
from instantstart.services.storage.model_fsx import fsx_result, fsx_status
from instantstart.services.storage.model_hub import check_on_hub
from instantstart.services.storage.model_job import raise_failed_download
from instantstart.services.storage.model_params import (
    DEFAULT_HUB,
    ModelDownloadParams,
    ModelDownloadRequest,
    ModelEntry,
    ModelFile,
    ModelListRequest,
    ModelListResult,
    ModelStatus,
    ModelStatusRequest,
)
from instantstart.services.storage.s3_claims import active_cluster, claim_source
from instantstart.store.models import ClusterRow

KIND = "model_download"
NAMESPACE = "default"
JOB_TIMEOUT = 6 * 3600
MAX_ATTEMPTS = 3


def _base(src: dict[str, Any], model_id: str, revision: str) -> str:
    return f"{src['prefix'] or ''}{md.model_dir(model_id, revision)}/"


def read_manifest(app: AppContext, bucket: str, region: str, key: str) -> dict[str, Any] | None:
    """A model's manifest.json, or None while the model is absent or partial (blocking); always None for an FSx
    claim (no bucket: only a pod reads Lustre, so the Job itself finds a manifest already there)."""
    if not bucket:
        return None
    body = s3.get_object(app.aws, region, bucket, key, identity.account_id(app.aws, region))
    return json.loads(body) if body is not None else None


def gpu_instance_types(api: Api) -> list[str]:
    """Instance types of the cluster's nodes that have accelerators, GPUs or Neuron devices, by the catalog or the
    node's advertised devices (the Job prefers other nodes, so it never sits on an accelerator's cpu/memory)."""
    nodes = wire.items(kube_call("list nodes", core_kinds.list_nodes, api))
    return accelerated_types(nodes)


def accelerated_types(nodes: list[dict[str, Any]]) -> list[str]:
    """The instance types among `nodes` with GPUs or Neuron devices (catalog facts, or the node's capacity)."""
    known = catalog()
    found = set()
    for node in nodes:
        itype = (node["metadata"].get("labels") or {}).get(INSTANCE_TYPE_LABEL)
        capacity = (node.get("status") or {}).get("capacity") or {}
        devices = any(int(capacity.get(key) or 0) > 0 for key in (GPU, NEURON))
        if itype and (devices or (itype in known and known[itype].accelerated)):
            found.add(itype)
    return sorted(found)


def log_lines(api: Api, job: str) -> list[str]:
    """The last 50 lines the Job's newest started pod printed (blocking; empty while none has started)."""
    pods = wire.items(core_kinds.list_pods(api, NAMESPACE, label_selector=f"job-name={job}"))
    if not pods:
        return []
    pod = max(pods, key=lambda p: wire.metadata(p).get("creationTimestamp") or "")
    if wire.phase(pod) == "Pending":
        return []
    try:
        text = core_kinds.read_pod_log(api, wire.name(pod), NAMESPACE, container="download", tail_lines=50)
    except Exception as exc:
        if api_failure(exc) is None:
            raise
        return []
    return str(text).splitlines()


def last_progress(api: Api, job: str) -> dict[str, int] | None:
    """The last `progress {...}` line the Job's newest pod printed (blocking)."""
    lines = [ln for ln in log_lines(api, job) if ln.startswith("progress ")]
    return json.loads(lines[-1][len("progress ") :]) if lines else None


def _job_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE}}


def job_state(job: dict[str, Any] | None) -> str:
    """RUNNING, SUCCEEDED or FAILED from a Job's conditions (ABSENT when there is none)."""
    if job is None:
        return "ABSENT"
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "SUCCEEDED" if cond["type"] == "Complete" else "FAILED"
    return "RUNNING"


async def stage_download(stage: StageContext) -> dict[str, Any]:
    """Run (or adopt) the download Job, report progress, and check the manifest; a model whose manifest already
    exists is left alone. The token Secret goes when the download ends: done, failed for good, or cancelled."""
    p = stage.params_as(ModelDownloadParams)
    app = stage.app
    manifest_key = _base({"prefix": p.prefix}, p.model_id, p.revision) + md.MANIFEST
    api = await blocking(kube_api, app.kube, await _eks_name(app, p.cluster_tag), p.region)
    seen: dict[str, Any] = {}
    ends = True
    try:
        existing = await blocking(read_manifest, app, p.bucket_name, p.bucket_region, manifest_key)
        if existing is not None:
            await stage.progress(f"{p.model_id}@{p.revision} is already in {p.claim}: nothing to do")
            return {
                "alreadyPresent": True,
                "files": len(existing.get("files") or []),
                "totalBytes": existing.get("totalBytes"),
                "path": md.model_dir(p.model_id, p.revision),
            }
        await _start_job(stage, api, p)
        await _wait_for_job(stage, api, p, seen)
    except BaseException as exc:
        ends = await token.ends_with_attempt(stage, exc, MAX_ATTEMPTS)
        raise
    finally:
        if p.token_secret_name and ends:
            await token.delete_secret(api, p.token_secret_name, NAMESPACE)
    if seen.get("state") == "FAILED":
        await raise_failed_download(api, NAMESPACE, p.job_name)
    if p.storage_type == "fsx":
        return fsx_result(await blocking(log_lines, api, p.job_name), p, seen.get("last"))
    manifest = await blocking(read_manifest, app, p.bucket_name, p.bucket_region, manifest_key)
    if manifest is None:
        raise ProviderError(f"The Job {p.job_name} ended but {manifest_key} is missing.", hint="Retry the download.")
    return {
        "alreadyPresent": False,
        "progress": seen.get("last"),
        "jobName": p.job_name,
        "hubEndpoint": p.hf_endpoint or DEFAULT_HUB,
        "files": len(manifest.get("files") or []),
        "totalBytes": manifest.get("totalBytes"),
        "path": md.model_dir(p.model_id, p.revision),
    }


async def _wait_for_job(stage: StageContext, api: Api, p: ModelDownloadParams, seen: dict[str, Any]) -> None:
    """Wait for the Job to end, reporting each new progress line; `seen` keeps the last progress and state."""

    async def finished() -> tuple[bool, str]:
        live = await blocking(read_object, api, _job_body(p.job_name))
        state = job_state(live)
        progress = await blocking(last_progress, api, p.job_name)
        if progress and progress != seen.get("last"):
            seen["last"] = progress
            await stage.progress(f"{progress['files']}/{progress['filesTotal']} files, "
                                 f"{progress['bytes']}/{progress['bytesTotal']} bytes copied")
        seen["state"] = state
        return state in ("SUCCEEDED", "FAILED"), f"Job {p.job_name}: {state}"

    await wait_until(stage, finished, limit_seconds=JOB_TIMEOUT, what=f"Job {p.job_name}")


async def _start_job(stage: StageContext, api: Api, p: ModelDownloadParams) -> None:
    """Create the download Job unless it exists (a retry adopts it)."""
    if await blocking(read_object, api, _job_body(p.job_name)) is not None:
        return
    if p.token_secret_name:
        await blocking(token.check_still_there, api, p.token_secret_name, NAMESPACE)
    job = md.build_job(
        name=p.job_name,
        namespace=NAMESPACE,
        model_id=p.model_id,
        revision=p.revision,
        claim=p.claim,
        cpu=p.cpu,
        memory_gi=p.memory,
        token_secret_name=p.token_secret_name,
        gpu_instance_types=p.gpu_instance_types,
        hf_endpoint=p.hf_endpoint,
        image=p.image or stage.app.settings.model_download_image,
    )
    await blocking(apply_object, api, md.background_priority_class())  # before its pods need it
    await blocking(apply_object, api, job)
    await stage.progress(f"Job {NAMESPACE}/{p.job_name} started (CPU only)")


async def _eks_name(app: AppContext, tag: str) -> str:
    from instantstart.services.base.registry import get_cluster

    row: ClusterRow = await blocking(get_cluster, app.db, tag)
    return row.eks_cluster_name


KINDS.register(
    OperationKind(
        name=KIND,
        params=ModelDownloadParams,
        stages=(StageSpec("download", stage_download, max_attempts=MAX_ATTEMPTS, timeout_seconds=JOB_TIMEOUT + 600),),
    )
)


@operation(
    "model_download_enhanced",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/models/download",
    completion="operation_get",
    example={"modelId": "Qwen/Qwen3-0.6B"},
)
async def model_download_enhanced(ctx: CallContext, req: ModelDownloadRequest) -> OperationRef:
    """Download a Hugging Face model into an S3 claim of the active cluster, at models/<modelId>/<revision>/:
    a Kubernetes Job that requests only cpu/memory (never a GPU; it prefers non-GPU nodes), stages the files
    on the node's instance NVMe (only its own directory /opt/dlami/nvme/instantstart/<org>--<name>/<revision> is
    mounted; else an emptyDir), copies them into the claim and writes manifest.json (files, sizes, sha256) last.
    hfToken goes into a Kubernetes Secret that the Job reads by secretKeyRef and that is deleted however the
    download ends (done, failed, refused, cancelled; one orphaned by a server crash goes with the next download);
    it is never stored. A model+revision already present is a no-op. The hub is asked first
    (GET /api/models/<id>/revision/<rev>): an unknown modelId (with the closest ids the hub has) or revision, a
    refused token or a gated model without hfToken fail at once.
    The Job fetches from the server's INSTANTSTART_HF_ENDPOINT (a hub mirror, passed as
    HF_ENDPOINT; shown as hubEndpoint), else huggingface.co. Progress (files, bytes) shows in operation_get;
    model_download_status, model_list. With fsxStorage the model goes into that FSx for Lustre claim instead
    (only one InstantStart created; mount it with fsxClaim and serve /fsx/models/<modelId>/<revision>); the result
    (files, bytes, mountPath) is in the operation, read from the Job's log."""
    replayed = await ctx.app.runner.replay(KIND, ctx.idempotency_key, status_tool="operation_get", poll_after_seconds=5)
    if replayed is not None:
        return replayed  # a retry: the first call's operation (and its Secret) stand; write nothing again
    await check_on_hub(ctx.app, req)  # an unknown model or a missing token fails now, not after a Job
    row = await active_cluster(ctx)
    api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
    if req.fsx_storage is not None:
        await blocking(check_fsx_claim, api, row, NAMESPACE, req.fsx_storage, "fsxStorage")
        src: dict[str, Any] = {"bucketName": "", "region": "", "prefix": None}
    else:
        src = await blocking(claim_source, ctx.app, row, req.s3_storage)
    if req.cpu in ("0", "0m"):
        raise InvalidInput("Invalid input: cpu: must be more than 0", details={"fields": [{"field": "cpu"}]})
    job = md.job_name(req.model_id, req.revision)
    gpu_types = await blocking(gpu_instance_types, api)
    await blocking(token.sweep_orphans, ctx.app, api, NAMESPACE, KIND)
    secret_name = await token.write_secret(api, job, NAMESPACE, req.hf_token) if req.hf_token is not None else None
    ref = None
    try:
        ref = await _submit(ctx, row, req, src, job, secret_name, gpu_types)
    finally:
        # Not recorded (refused, failed, cancelled), or an idempotent twin won the race: the Secret is nobody's.
        if secret_name and (ref is None or await blocking(_token_secret_of, ctx.app, ref.operation_id) != secret_name):
            await token.delete_secret(api, secret_name, NAMESPACE)
    return ref


def _token_secret_of(app: AppContext, operation_id: str) -> str | None:
    return app.runner.store.get(operation_id).params.get("tokenSecretName")


async def _submit(
    ctx: CallContext,
    row: ClusterRow,
    req: ModelDownloadRequest,
    src: dict[str, Any],
    job: str,
    secret_name: str | None,
    gpu_types: list[str],
) -> OperationRef:
    claim = req.fsx_storage or req.s3_storage
    params = ModelDownloadParams(
        cluster_tag=row.tag,
        region=row.region,
        model_id=req.model_id,
        revision=req.revision,
        claim=claim,
        namespace=NAMESPACE,
        storage_type="fsx" if req.fsx_storage else "s3",
        bucket_name=src["bucketName"],
        bucket_region=src["region"],
        prefix=src["prefix"],
        cpu=req.cpu,
        memory=req.memory,
        job_name=job,
        token_secret_name=secret_name,
        gpu_instance_types=gpu_types,
        hf_endpoint=ctx.app.settings.hf_endpoint,
        image=ctx.app.settings.model_download_image,
    )
    return await ctx.app.runner.submit(
        KIND,
        params,
        target=download_target(row.tag, claim, req.model_id, req.revision),
        idempotency_key=ctx.idempotency_key,
        status_tool="operation_get",
        poll_after_seconds=5,
    )


def download_target(tag: str, claim: str, model_id: str, revision: str) -> str:
    """The operation target of one model+revision's download into a claim (one download at a time)."""
    return f"model:{tag}:{claim}:{model_id}@{revision}"


@operation("model_list", method="GET", path="/models", example={})
async def model_list(ctx: CallContext, req: ModelListRequest) -> ModelListResult:
    """The complete models in an S3 claim of the active cluster, read from their manifests (a partial copy
    has no manifest and is not listed)."""
    row = await active_cluster(ctx)
    src = await blocking(claim_source, ctx.app, row, req.s3_storage)
    entries = await blocking(_models, ctx.app, src)
    return ModelListResult(
        storage=req.s3_storage, models=entries, count=len(entries), hub_endpoint=_hub(ctx.app)
    )


def _hub(app: AppContext) -> str:
    return app.settings.hf_endpoint or DEFAULT_HUB


def _models(app: AppContext, src: dict[str, Any]) -> list[ModelEntry]:
    root = f"{src['prefix'] or ''}{md.MODELS_DIR}/"
    owner = identity.account_id(app.aws, src["region"])
    keys = s3.list_keys(app.aws, src["region"], src["bucketName"], root, owner, suffix="/" + md.MANIFEST)
    found = []
    for key in keys:
        manifest = read_manifest(app, src["bucketName"], src["region"], key)
        if manifest:
            found.append(
                ModelEntry(
                    model_id=manifest["modelId"],
                    revision=manifest["revision"],
                    path=md.model_dir(manifest["modelId"], manifest["revision"]),
                    files=len(manifest.get("files") or []),
                    total_bytes=int(manifest.get("totalBytes") or 0),
                )
            )
    return found


@operation("model_download_status", method="GET", path="/models/status", example={"modelId": "Qwen/Qwen3-0.6B"})
async def model_download_status(ctx: CallContext, req: ModelStatusRequest) -> ModelStatus:
    """Where the download of one model+revision into a claim stands: COMPLETE with the manifest's files,
    RUNNING with the last progress (files, bytes), FAILED, or ABSENT. For an FSx claim (fsxStorage), whose files
    only pods can read, the state comes from InstantStart's last download of that model into the claim (COMPLETE
    with its file count and bytes, no per-file list)."""
    row = await active_cluster(ctx)
    job = md.job_name(req.model_id, req.revision)
    if req.fsx_storage is not None:
        api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
        await blocking(check_fsx_claim, api, row, NAMESPACE, req.fsx_storage, "fsxStorage")
        base = ModelStatus(model_id=req.model_id, revision=req.revision, storage=req.fsx_storage, state="ABSENT",
                           job_name=job, hub_endpoint=_hub(ctx.app))
        latest = ctx.app.runner.store.list_operations(kind=KIND, target=download_target(
            row.tag, req.fsx_storage, req.model_id, req.revision), limit=1)[0]
        return fsx_status(base, latest[0] if latest else None, lambda: last_progress(api, job))
    src = await blocking(claim_source, ctx.app, row, req.s3_storage)
    manifest = await blocking(
        read_manifest, ctx.app, src["bucketName"], src["region"], _base(src, req.model_id, req.revision) + md.MANIFEST
    )
    base = ModelStatus(
        model_id=req.model_id,
        revision=req.revision,
        storage=req.s3_storage,
        state="ABSENT",
        job_name=job,
        hub_endpoint=_hub(ctx.app),
    )
    if manifest is not None:
        files = [ModelFile.model_validate(f) for f in manifest.get("files") or []]
        return base.model_copy(update={"state": "COMPLETE", "files": files, "total_bytes": manifest.get("totalBytes")})
    api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
    state = job_state(await blocking(read_object, api, _job_body(job)))
    progress = await blocking(last_progress, api, job) if state != "ABSENT" else None
    return base.model_copy(update={"state": "RUNNING" if state == "SUCCEEDED" else state, "progress": progress})
