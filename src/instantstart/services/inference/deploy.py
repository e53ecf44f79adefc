"""inference_deploy_container: a self-managed model server (Deployment + Service) that ends when it is Ready."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.catalog.secret import Secret
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed, ProviderError
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import apply_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.logs import register_secret
from instantstart.manifests import inference as inference_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.cluster_status import collect_status
from instantstart.services.base.fsx_claims import mountable_fsx
from instantstart.services.base.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.inference import server_sizing as sz
from instantstart.services.inference.placement import check_types, place
from instantstart.services.teams.placement import in_team_namespace
from instantstart.store.models import ClusterRow, utcnow
from instantstart.validation import ClusterTag, KubeName, SourceRange

KIND = "inference_deploy"
READY_TIMEOUT = 3600
DEFAULT_CLAIM = "s3-claim"
DNS_LABEL = r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$"
INSTANCE = r"^ml\.[a-z0-9]+\.[a-z0-9]+$"


class DeployRequest(WireModel):
    """A model server to run: the command, and the GPUs each replica gets (asked, never inferred)."""

    deployment_command: str = Field(
        min_length=1, max_length=4000,
        description="The server's command line, e.g. `vllm serve Qwen/Qwen3-0.6B --max-model-len 1280 "
        "--tensor-parallel-size 1`. Run as an argument list, never through a shell.",
    )
    gpu_count: int = Field(ge=1, le=64, description="GPUs per replica. Required; never inferred from the command.")
    docker_image: str | None = Field(default=None, min_length=3, max_length=512, pattern=r"^[^\s]+$",
                                     description="Default: the engine's image (vLLM or SGLang).")
    deployment_name: str | None = Field(default=None, pattern=DNS_LABEL,
                                        description="Default <engine>-model-<YYMMDD-HHMMSS>; the Service is "
                                        "<name>-service.")
    replicas: int = Field(default=1, ge=1, le=64)
    instance_types: Annotated[list[str], Field(max_length=16)] | Annotated[str, Field(max_length=1024)] | None = Field(
        default=None, description="A preference list of GPU instance types, a list or comma-separated "
        '("ml.g6e.xlarge,ml.g5.xlarge"): the first the cluster has is used. Default: every GPU type in the cluster '
        "with enough GPUs per node (or the smallest that holds gpuMemory).")
    gpu_memory: Annotated[float, Field(gt=0, le=4096)] | Annotated[str, Field(max_length=16)] | None = Field(
        default=None, description="Memory one GPU needs, GiB (24) or a quantity (\"48Gi\"): picks the smallest GPU "
        "type of the cluster whose per-GPU memory holds it; refused naming the cluster's types when none does.")
    cpu_request: str | None = Field(default=None, max_length=32, description="cpu request per replica, a Kubernetes "
                                    "quantity (\"8\", \"500m\"); at most what a node of the type gives pods. Default: "
                                    "the replica's GPU share of the node.")
    memory_request: str | None = Field(default=None, max_length=32, description="memory request (and limit) per "
                                       "replica, a Kubernetes quantity (\"64Gi\"); at most what a node of the type "
                                       "gives pods. Default: the replica's GPU share of the node.")
    service_type: Literal["clusterip", "external", "modelpool"] = Field(
        default="clusterip", description="clusterip (in-cluster), external (a LoadBalancer: needs sourceRanges; "
        "internal unless loadBalancerScheme is internet-facing), modelpool (warm workers labelled "
        "business=unassigned until inference_pool_assign).")
    load_balancer_scheme: Literal["internal", "internet-facing"] = Field(
        default="internal", description="external only: internal (reachable from the VPC) or internet-facing "
        "(public: needs apiKey, vLLM and SGLang serve without authentication otherwise).")
    source_ranges: list[SourceRange] | None = Field(
        default=None, min_length=1, max_length=16, description="external only, required: the CIDRs that may "
        "reach the load balancer (spec.loadBalancerSourceRanges), e.g. [\"10.0.0.0/16\"].")
    api_key: Secret | None = Field(default=None, description="external only, required when internet-facing: the "
                                   "key clients must send as `Authorization: Bearer`. Kept in a Kubernetes Secret "
                                   "and given to the server's --api-key from it; never stored or echoed.")
    port: int = Field(default=8000, ge=1, le=65535, description="Used when the command sets no --port "
                      "(vLLM and SGLang get an explicit --port).")
    namespace: KubeName = Field(default="default", description="Default: the namespace of the caller's team on the "
                                "cluster (hyperpod-ns-<team>), else default.")
    fsx_claim: KubeName | None = Field(default=None, description="An FSx for Lustre claim of the namespace "
                                       "(fsx_storage_create) mounted read-only at /fsx, e.g. to serve a model "
                                       "model_download_enhanced put there (`vllm serve /fsx/models/<id>/<rev>`); "
                                       "required when the command uses /fsx.")
    hugging_face_token: Secret | None = None
    cluster_tag: ClusterTag | None = None


class DeployParams(ParamsModel, inference_manifests.ServerSpec):
    """What the deploy operation records: the server's spec (the token never: only the Secret's name) and the
    cluster it runs on."""

    cluster_tag: str
    region: str
    eks_cluster: str


def _field_error(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {field}: {message}", hint=hint,
                        details={"fields": [{"field": field, "message": message}]})


def _command(req: DeployRequest) -> tuple[inference_manifests.Engine, list[str], int, str | None]:
    try:
        words = inference_manifests.tokens(req.deployment_command)
        engine = inference_manifests.engine_of(words, req.docker_image)
        tp, pp = inference_manifests.parallelism(words)
        port = inference_manifests.listening_port(words, engine, req.port)
    except inference_manifests.CommandError as exc:
        raise _field_error("deploymentCommand", str(exc), "Give one command line: `vllm serve <model> …`.") from None
    if tp * pp > req.gpu_count:
        raise _field_error(
            "gpuCount",
            f"the command asks for tensor parallel {tp} x pipeline parallel {pp} = {tp * pp} GPUs, "
            f"but gpuCount is {req.gpu_count}",
            f"Set gpuCount to {tp * pp} (confirm it with the user) or lower --tensor-parallel-size.",
        )
    if engine.name == "other" and not req.docker_image:
        raise _field_error("dockerImage", "required when the command is neither vLLM nor SGLang",
                           "Name the serving container's image.")
    _exposure(req, engine, words)
    return engine, inference_manifests.with_port(words, engine, port), port, inference_manifests.served_model(words)


def _exposure(req: DeployRequest, engine: inference_manifests.Engine, words: list[str]) -> None:
    """A load balancer is never public by accident: external needs source ranges; internet-facing needs an API
    key, which only reaches the server from a Secret (never the command line)."""
    if inference_manifests.flag(words, "--api-key") is not None:
        raise _field_error("deploymentCommand", "--api-key in the command would keep the key in plain text in the "
                           "Deployment", "Drop --api-key from the command and give apiKey (kept in a Secret).")
    if req.service_type != "external":
        extras = [f for f, given in (("sourceRanges", req.source_ranges), ("apiKey", req.api_key),
                                     ("loadBalancerScheme", req.load_balancer_scheme != "internal")) if given]
        if extras:
            raise _field_error(extras[0], "only used with serviceType external",
                               f"Drop {extras[0]}, or set serviceType external.")
        return
    if not req.source_ranges:
        raise _field_error("sourceRanges", "required with serviceType external: a load balancer without source "
                           "ranges takes requests from anywhere it is reachable", 'Give the CIDRs of your clients, '
                           'e.g. "sourceRanges": ["10.0.0.0/16"]; or use serviceType clusterip and '
                           "inference_call_model.")
    if req.api_key is not None and engine.name == "other":
        raise _field_error("apiKey", "works with vLLM and SGLang (their --api-key); this command is neither",
                           "Drop apiKey and configure the image's own authentication, or serve with vLLM/SGLang.")
    if req.load_balancer_scheme == "internet-facing" and req.api_key is None:
        raise _field_error("apiKey", "required with loadBalancerScheme internet-facing: vLLM and SGLang answer "
                           "anyone otherwise", "Give apiKey (8-4096 characters), or use the internal scheme.")


def _plan(app: AppContext, row: ClusterRow, req: DeployRequest, name: str, words: list[str]) -> str | None:
    """Blocking checks against the cluster: the name is free, the S3 claim exists when /s3 is used."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    try:
        kube_call("read deployment", core_kinds.read_deployment, api, name, req.namespace)
    except NotFound:
        pass
    else:
        raise _field_error("deploymentName", f"{req.namespace}/{name} already exists",
                           "Pick another name, or inference_undeploy the existing one first.")
    if not any(w.startswith(inference_manifests.S3_MOUNT + "/") or w == inference_manifests.S3_MOUNT for w in words):
        return None
    claim = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": DEFAULT_CLAIM, "namespace": req.namespace}})
    if claim is None:
        raise PreconditionFailed(
            f"The command reads from {inference_manifests.S3_MOUNT}, but {req.namespace} has no claim {DEFAULT_CLAIM}.",
            hint="Deploy in the namespace of the cluster's S3 claim (default), or create one with s3_storage_create.",
        )
    return DEFAULT_CLAIM


@operation(
    "inference_deploy_container",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/deployments",
    completion="operation_get",
    example={"deploymentCommand": "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280", "gpuCount": 1},
)
async def inference_deploy_container(ctx: CallContext, req: DeployRequest) -> OperationRef:
    """Run a model server (vLLM, SGLang or another image) as a Deployment with a Service; finished when every
    replica is Ready. gpuCount is required and is never inferred from --tensor-parallel-size: tensor x pipeline
    parallel above gpuCount is refused. Replicas request their GPUs and are pinned to GPU instance types, never
    CPU-only nodes; refused when no node has that many GPUs free (the message says where GPUs are free).
    instanceTypes is a preference list (the first the cluster has); gpuMemory picks the smallest cluster type whose
    GPUs hold it; cpuRequest/memoryRequest (Kubernetes quantities) override the replica's share of the node. The
    Hugging Face token is kept only in a Kubernetes Secret. serviceType external needs sourceRanges and is an
    internal load balancer unless loadBalancerScheme is internet-facing, which needs apiKey (given to the server's
    --api-key from a Secret); the result's `exposure` says which. Call the model with inference_call_model."""
    replayed = await ctx.app.runner.replay(KIND, ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    engine, words, port, model = _command(req)
    wanted = check_types(sz.preference(req.instance_types), req.gpu_count)
    gib = sz.gpu_memory_gib(req.gpu_memory) if req.gpu_memory is not None else None
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    req = await in_team_namespace(ctx, tag, req)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    status = await collect_status(ctx.app, tag, ())
    placement = place(status, sz.choose_types(status, wanted, gib, req.gpu_count), req.gpu_count, req.replicas)
    sized = sz.requests(placement.instance_types, req.gpu_count, req.cpu_request, req.memory_request)
    name = req.deployment_name or inference_manifests.default_name(engine, utcnow())
    claim = await blocking(_plan, ctx.app, row, req, name, words)
    fsx = await blocking(mountable_fsx, ctx.app, row, req.namespace, req.fsx_claim, words, "deploymentCommand")
    secret = None
    if req.hugging_face_token is not None:
        token = req.hugging_face_token.get_secret_value()
        register_secret(token)
        api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
        body = inference_manifests.token_secret(name, req.namespace, token)
        await blocking(kube_call, "write the token Secret", apply_object, api, body)
        secret = inference_manifests.token_secret_name(name)
    key_secret = None
    if req.api_key is not None:
        key = req.api_key.get_secret_value()
        register_secret(key)
        api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
        await blocking(
            kube_call,
            "write the API key Secret",
            apply_object,
            api,
            inference_manifests.api_key_secret(name, req.namespace, key),
        )
        key_secret = inference_manifests.api_key_secret_name(name)
    params = DeployParams(
        cluster_tag=tag, region=row.region, eks_cluster=row.eks_cluster_name, name=name, namespace=req.namespace,
        engine=engine.name, command=words, image=req.docker_image or engine.image, gpu_count=req.gpu_count,
        replicas=req.replicas, instance_types=placement.instance_types, port=port, service_type=req.service_type,
        model=model, token_secret=secret, s3_claim=claim, fsx_claim=fsx, load_balancer_scheme=req.load_balancer_scheme,
        source_ranges=list(req.source_ranges or []), api_key_secret=key_secret, cpu_milli=sized.cpu_milli,
        memory_mib=sized.memory_mib,
    )
    return await submit_for_cluster(ctx, KIND, tag, params.model_dump(mode="json", by_alias=True),
                                    status_tool="operation_get", poll_after_seconds=15, workload=(req.namespace, name))


def _lb_controller(api: Api) -> bool:
    found = read_object(api, {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "aws-load-balancer-controller", "namespace": "kube-system"}})
    return found is not None


async def stage_apply(stage: StageContext) -> dict[str, Any]:
    """Server-side apply the Deployment and its Service (idempotent: a rerun re-applies the same objects)."""
    p = stage.params_as(DeployParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    lbc = p.service_type == "external" and await blocking(_lb_controller, api)
    await stage.progress(f"applying Deployment {p.namespace}/{p.name} ({p.replicas} replica(s) x {p.gpu_count} GPU)")
    await blocking(kube_call, "apply the Deployment", apply_object, api, inference_manifests.deployment(p))
    svc = await blocking(
        kube_call, "apply the Service", apply_object, api, inference_manifests.service(p, load_balancer_controller=lbc)
    )
    # The Service's uid is what inference_call_model later checks before it takes a load balancer address from it.
    return {"deployment": p.name, "service": inference_manifests.service_name(p.name), "loadBalancerController": lbc,
            "exposure": inference_manifests.exposure(p), "serviceUid": svc["metadata"]["uid"]}


def _rollout(api: Api, p: DeployParams) -> tuple[bool, str]:
    dep = kube_call("read the Deployment", core_kinds.read_deployment, api, p.name, p.namespace)
    ready = wire.ready_replicas(dep)
    message = f"{p.name}: {ready}/{p.replicas} replicas Ready"
    if ready >= p.replicas:
        return True, message
    pods = kube_call(
        "list pods", core_kinds.list_pods, api, p.namespace, label_selector=f"{inference_manifests.LABEL_APP}={p.name}"
    )
    for pod in wire.items(pods):
        for cond in wire.conditions(pod):
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
                return False, f"{message}; {wire.name(pod)} unschedulable: {cond['message']}"
        for cs in wire.container_statuses(pod):
            waiting = wire.section(cs.get("state"), "waiting")
            if waiting.get("reason") in ("ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff"):
                raise ProviderError(f"{wire.name(pod)}: {waiting['reason']}: {waiting.get('message') or ''}",
                                    hint="Check dockerImage and the command (pod_logs shows the server's output).",
                                    retryable=False)
    return False, message


def _balancer_url(api: Api, p: DeployParams) -> str | None:
    """The load balancer's URL once the controller wrote its address to the Service (None before, and for
    in-cluster servers): the DNS name AWS gives, or an IP."""
    if p.service_type != "external":
        return None
    svc = kube_call(
        "read the Service",
        core_kinds.read_service, api,
        inference_manifests.service_name(p.name),
        p.namespace,
    )
    ingress = wire.ingress(svc)
    address = (ingress[0].get("hostname") or ingress[0].get("ip")) if ingress else None
    return f"http://{address}:{p.port}" if address else None


async def stage_ready(stage: StageContext) -> dict[str, Any]:
    """Wait until every replica passes its readiness probe (the engine's health path)."""
    p = stage.params_as(DeployParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)

    async def ready() -> tuple[bool, str]:
        return await blocking(_rollout, api, p)

    await wait_until(stage, ready, limit_seconds=READY_TIMEOUT, what=f"model server {p.name}")
    service = inference_manifests.service_name(p.name)
    return {
        "name": p.name,
        "namespace": p.namespace,
        "service": service,
        "engine": p.engine,
        "model": p.model,
        "replicas": p.replicas,
        "gpuCount": p.gpu_count,
        "url": f"http://{service}.{p.namespace}.svc.cluster.local:{p.port}",
        "exposure": inference_manifests.exposure(p),
        "serviceUid": stage.outputs.get("apply", {}).get("serviceUid"),
        "loadBalancerUrl": await blocking(_balancer_url, api, p),
    }


KINDS.register(
    OperationKind(
        name=KIND,
        params=DeployParams,
        stages=(
            StageSpec("apply", stage_apply, max_attempts=3),
            StageSpec("ready", stage_ready, max_attempts=2, timeout_seconds=READY_TIMEOUT + 300),
        ),
        result_from=lambda outputs: outputs.get("ready", {}),
    )
)
