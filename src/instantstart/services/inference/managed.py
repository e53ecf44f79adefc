"""Managed inference through the HyperPod inference operator: lint, deploy, list and delete InferenceEndpointConfigs."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, PreconditionFailed, ProviderError
from instantstart.kube import custom_objects
from instantstart.kube.apply import apply_object, delete_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.informers import Informer
from instantstart.manifests import inference_endpoint as iec
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import resolve_tag, submit_for_cluster
from instantstart.services.base.status_model import WatchFreshness
from instantstart.services.base.watch import custom, watched
from instantstart.services.base.watch.state import memoised
from instantstart.services.core.instance_types import catalog
from instantstart.services.inference.managed_autoscaling import ManagedAutoscaling, to_spec
from instantstart.services.inference.managed_models import KvCache, ModelSource
from instantstart.services.inference.placement import endpoint_cpu_memory
from instantstart.services.inference.services import cluster_row
from instantstart.services.teams.placement import in_team_namespace
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, InvocationPath, KubeName

READY_TIMEOUT = 3600
CRD = f"{iec.PLURAL}.{iec.GROUP}"


class ManagedRequest(WireModel):
    """A model endpoint for the inference operator, from typed fields (never raw YAML)."""

    name: str = Field(min_length=1, max_length=253, description="The InferenceEndpointConfig's name.")
    model_name: str = Field(min_length=1, max_length=253)
    image: str = Field(min_length=3, max_length=512, pattern=r"^[^\s]+$", description="The worker image.")
    instance_type: str = Field(pattern=r"^ml\..+$")
    gpu_count: int = Field(ge=1, le=64)
    model_source: ModelSource
    invocation_port: int = Field(default=8000, ge=1, le=65535)
    args: list[str] = Field(default_factory=list, max_length=200, description="The worker's arguments.")
    served_model_name: str | None = Field(default=None, max_length=253)
    endpoint_name: str | None = Field(default=None, max_length=253, description="SageMaker endpoint to register.")
    replicas: int = Field(default=1, ge=1, le=64)
    cpu: str | None = Field(default=None, max_length=16, description="Default: the GPUs' share of the node.")
    memory: str | None = Field(default=None, max_length=16, description="Default: the GPUs' share of the node.")
    kv_cache: KvCache | None = None
    routing_strategy: Literal["prefixaware", "kvaware", "session", "roundrobin"] | None = None
    tls_output_s3_uri: str | None = Field(default=None, max_length=1024)
    invocation_endpoint: InvocationPath | None = Field(
        default=None, description="The server's path for requests (default invocations, the operator's: vLLM and "
        "SGLang answer chat there): letters, digits, '-', '_' and '/' only; inference_call_model refuses any other "
        "path an endpoint carries.")
    autoscaling: ManagedAutoscaling | None = Field(default=None, description="Replica bounds and a Prometheus or "
                                                   "CloudWatch trigger (the operator's autoScalingSpec).")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


def spec_of(req: ManagedRequest) -> iec.EndpointSpec:
    """The builder input of a request."""
    src, kv = req.model_source, req.kv_cache
    cpu, memory = endpoint_cpu_memory(req.instance_type, req.gpu_count, req.cpu, req.memory)
    return iec.EndpointSpec(
        name=req.name, namespace=req.namespace, model_name=req.model_name, image=req.image,
        instance_type=req.instance_type, gpu_count=req.gpu_count, source_type=src.type,
        invocation_port=req.invocation_port, args=list(req.args), served_model_name=req.served_model_name,
        endpoint_name=req.endpoint_name, replicas=req.replicas, cpu=cpu, memory=memory,
        model_location=src.model_location, s3_bucket=src.s3_bucket, s3_region=src.s3_region,
        fsx_file_system_id=src.fsx_file_system_id, fsx_dns_name=src.fsx_dns_name, fsx_mount_name=src.fsx_mount_name,
        hugging_face_model_id=src.hugging_face_model_id, kv_l1=bool(kv and kv.enable_l1),
        kv_l2=bool(kv and kv.enable_l2), l2_backend=kv.l2_backend if kv else None, l2_url=kv.l2_url if kv else None,
        routing_strategy=req.routing_strategy, tls_output_s3_uri=req.tls_output_s3_uri,
        autoscaling=to_spec(req.autoscaling),
        **({"invocation_endpoint": req.invocation_endpoint} if req.invocation_endpoint else {}),
    )


class LintFinding(WireModel):
    """One rule broken: its code, the field, what is wrong, the fix."""

    code: str
    severity: str
    field: str
    message: str
    fix: str


class LintResult(WireModel):
    """The lint verdict and the rendered InferenceEndpointConfig."""

    ok: bool
    findings: list[LintFinding]
    manifest: dict[str, Any]


def lint_request(req: ManagedRequest) -> LintResult:
    """Run every lint rule on a request."""
    spec = spec_of(req)
    facts = catalog().get(req.instance_type)
    found = iec.lint(spec, facts.gpus if facts is not None else None)
    findings = [LintFinding(code=f.code, severity=f.severity, field=f.field, message=f.message, fix=f.fix)
                for f in found]
    return LintResult(ok=not any(f.severity == "error" for f in findings), findings=findings,
                      manifest=iec.endpoint_config(spec))


@operation("inference_managed_lint", method="POST", path="/inference/managed/lint", mutating=False,
           example={"name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0",
                    "instanceType": "ml.g6.4xlarge", "gpuCount": 1,
                    "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"}})
async def inference_managed_lint(ctx: CallContext, req: ManagedRequest) -> LintResult:
    """Check a managed endpoint before deploying it: each finding has a code and a fix (IEC001 port vs the
    engine's listening port, IEC002 served model name, IEC003 name lengths, IEC004 KV cache engine, IEC005 L2
    backend fields, IEC006 routing requirements, IEC007 GPUs vs instance type, IEC008 model source fields,
    IEC009 TLS location, IEC010 invocation path, IEC011 autoscaling). Returns the rendered InferenceEndpointConfig.
    Read-only; needs no cluster."""
    return lint_request(req)


class ManagedParams(ParamsModel):
    """What a managed deploy records: the rendered InferenceEndpointConfig."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    manifest: dict[str, Any]


def _crd_present(api: Api, name: str = CRD) -> bool:
    return read_object(api, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             "metadata": {"name": name}}) is not None


def _check_cluster(app: AppContext, tag: str | None) -> tuple[Any, bool]:
    row = cluster_row(app, tag)
    return row, _crd_present(kube_api(app.kube, row.eks_cluster_name, row.region))


@operation(
    "inference_managed_deploy",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/managed",
    completion="operation_get",
    example={"name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0",
             "instanceType": "ml.g6.4xlarge", "gpuCount": 1,
             "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"}},
)
async def inference_managed_deploy(ctx: CallContext, req: ManagedRequest) -> OperationRef:
    """Deploy a model through the HyperPod inference operator (an InferenceEndpointConfig: model source S3,
    FSx or Hugging Face; KV cache L1/L2; intelligent routing; TLS output; autoscaling). Refused when
    inference_managed_lint finds an error, or when the operator is not installed (hyperpod_update_advanced_features
    inferenceOperator).
    Finished when the config's DeploymentComplete condition is True. A member's model server goes to (only) their
    team's namespace."""
    tag = await blocking(resolve_tag, ctx.app.db, req.cluster_tag)
    req = await in_team_namespace(ctx, tag, req.model_copy(update={"cluster_tag": tag}))
    verdict = lint_request(req)
    errors = [f for f in verdict.findings if f.severity == "error"]
    if errors:
        raise InvalidInput(
            "Invalid input: " + "; ".join(f"{f.field}: {f.message} [{f.code}]" for f in errors),
            hint=" ".join(f.fix for f in errors),
            details={"fields": [{"field": f.field, "message": f.message, "code": f.code} for f in errors]},
        )
    row, present = await blocking(_check_cluster, ctx.app, req.cluster_tag)
    if not present:
        raise PreconditionFailed(f"The HyperPod inference operator is not installed on {row.tag} (no {CRD}).",
                                 hint='Enable it: hyperpod_update_advanced_features {"inferenceOperator": '
                                 '{"enabled": true}}.')
    params = ManagedParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                           name=req.name, namespace=req.namespace, manifest=verdict.manifest)
    return await submit_for_cluster(ctx, "inference_managed_deploy", row.tag, params, status_tool="operation_get",
                                    poll_after_seconds=15, workload=(req.namespace, req.name))


async def stage_apply(stage: StageContext) -> dict[str, Any]:
    """Server-side apply the InferenceEndpointConfig (a rerun re-applies the same object)."""
    p = stage.params_as(ManagedParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    await blocking(kube_call, "apply the InferenceEndpointConfig", apply_object, api, p.manifest)
    return {"name": p.name, "namespace": p.namespace}


def _state(api: Api, name: str, namespace: str) -> tuple[bool, str]:
    found = read_object(api, {"apiVersion": f"{iec.GROUP}/{iec.VERSION}", "kind": iec.KIND,
                              "metadata": {"name": name, "namespace": namespace}})
    if found is None:
        return False, f"{name}: not created yet"
    state, message = iec.state_of(found)
    if state in ("DeploymentFailed", "Failed"):
        raise ProviderError(f"{name}: {state}: {message}", hint="Check the worker's log (pod_logs) and "
                            "inference_managed_lint.", retryable=False)
    return state == "DeploymentComplete", f"{name}: {state} {message}".strip()


async def stage_ready(stage: StageContext) -> dict[str, Any]:
    """Wait for the DeploymentComplete condition."""
    p = stage.params_as(ManagedParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)

    async def ready() -> tuple[bool, str]:
        return await blocking(_state, api, p.name, p.namespace)

    await wait_until(stage, ready, limit_seconds=READY_TIMEOUT, what=f"endpoint {p.name}")
    port = p.manifest["spec"]["worker"]["modelInvocationPort"]["containerPort"]
    return {"name": p.name, "namespace": p.namespace, "state": "DeploymentComplete",
            "url": f"http://{p.name}.{p.namespace}.svc.cluster.local:{port}"}


class ManagedListRequest(WireModel):
    """Which namespace (every namespace when absent)."""

    namespace: KubeName | None = None
    cluster_tag: ClusterTag | None = None


class ManagedEndpoint(WireModel):
    """One InferenceEndpointConfig and its state from its conditions."""

    name: str
    namespace: str
    kind: str = Field(description="InferenceEndpointConfig or JumpStartModel.")
    model_name: str | None
    instance_type: str | None
    replicas: int | None
    state: str
    message: str
    kv_cache: dict[str, Any] | None
    routing_strategy: str | None
    endpoint_name: str | None = Field(description="The SageMaker endpoint registered for it (InvokeEndpoint).")
    endpoint_state: str | None


class ManagedEndpoints(WireModel):
    """The cluster's InferenceEndpointConfigs."""

    cluster_tag: str
    endpoints: list[ManagedEndpoint]
    count: int
    source: str = Field(default="direct", description=watched.SOURCE_HELP)
    watch: WatchFreshness | None = Field(default=None, description="How current the watched endpoints are.")
    note: str | None = Field(default=None, description="Why the answer was read directly, or how stale it is.")


def _items(api: Api, namespace: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for crd, kind, plural in ((CRD, iec.KIND, iec.PLURAL), (f"{iec.JUMPSTART_PLURAL}.{iec.GROUP}",
                                                          iec.JUMPSTART_KIND, iec.JUMPSTART_PLURAL)):
        if not _crd_present(api, crd):
            continue
        found = kube_call(f"list {plural}", custom_objects.list_custom, api, iec.GROUP, iec.VERSION, plural,
                          namespace or None)
        out += [{**item, "kind": kind} for item in found.get("items") or []]
    return out


def _endpoint(item: dict[str, Any]) -> ManagedEndpoint:
    spec = item.get("spec") or {}
    state, message = iec.state_of(item)
    jumpstart = item["kind"] == iec.JUMPSTART_KIND
    registered = ((item.get("status") or {}).get("endpoints") or {}).get("sagemaker") or {}
    return ManagedEndpoint(
        name=item["metadata"]["name"], namespace=item["metadata"]["namespace"], kind=item["kind"],
        model_name=(spec.get("model") or {}).get("modelId") if jumpstart else spec.get("modelName"),
        instance_type=(spec.get("server") or {}).get("instanceType") if jumpstart else spec.get("instanceType"),
        replicas=spec.get("replicas"), state=state, message=message, kv_cache=spec.get("kvCacheSpec"),
        routing_strategy=(spec.get("intelligentRoutingSpec") or {}).get("routingStrategy"),
        endpoint_name=iec.endpoint_name_of(item), endpoint_state=registered.get("state"))


def _direct(app: AppContext, row: ClusterRow, namespace: str | None) -> list[ManagedEndpoint]:
    """The endpoints read directly from the API server (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    return sorted((_endpoint(item) for item in _items(api, namespace)), key=lambda e: (e.namespace, e.name))


def _from_watches(namespace: str | None, infs: list[Informer]) -> list[ManagedEndpoint]:
    """The endpoints the watches hold (informers in ENDPOINT_KINDS order), rebuilt once per change of either."""
    configs, models = infs

    def compute() -> list[ManagedEndpoint]:
        out = [_endpoint(o) for inf in (configs, models) for o in inf.snapshot()[1].values()]
        return sorted(out, key=lambda e: (e.namespace, e.name))

    every: list[ManagedEndpoint] = memoised(configs, "managed-endpoints",
                                            (id(models), configs.version, models.version), compute)
    return [e for e in every if namespace in (None, e.namespace)]


async def _watched(app: AppContext, tag: str | None, namespace: str | None) -> ManagedEndpoints:
    """The endpoints by the status tools' rule (base/watch/watched.py): from the watches, stale with its age while
    one is down; read directly only when they have not synced."""
    row = await to_thread.run_sync(cluster_row, app, tag)
    got = await watched.from_watches(app, row, custom.ENDPOINT_KINDS, partial(_from_watches, namespace),
                                     partial(_direct, app, row, namespace))
    return ManagedEndpoints(cluster_tag=row.tag, endpoints=got.value, count=len(got.value), source=got.source,
                            watch=got.watch, note=got.note)


@operation("inference_managed_list", method="GET", path="/inference/managed", example={})
async def inference_managed_list(ctx: CallContext, req: ManagedListRequest) -> ManagedEndpoints:
    """The managed endpoints of the cluster (InferenceEndpointConfigs and JumpStartModels) with their state (from
    the conditions), model, instance type, replicas, KV cache, routing and registered SageMaker endpoint.
    Served from the cluster's watches (`watch` says how fresh; stale with its age while a watch is down).
    Read-only; empty when the inference operator is not installed."""
    return await _watched(ctx.app, req.cluster_tag, req.namespace)


class ManagedDeleteRequest(WireModel):
    """The endpoint config to delete."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


def _check_delete(app: AppContext, req: ManagedDeleteRequest) -> ManagedParams:
    row = cluster_row(app, req.cluster_tag)
    listed = _direct(app, row, req.namespace)
    kinds = {e.name: e.kind for e in listed}
    if req.name not in kinds:
        raise InvalidInput(f"Invalid input: name: no InferenceEndpointConfig {req.namespace}/{req.name}",
                           hint=f"Here: {', '.join(e.name for e in listed) or 'none'}.",
                           details={"fields": [{"field": "name", "message": "not deployed"}]})
    return ManagedParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name, name=req.name,
                         namespace=req.namespace, manifest={"kind": kinds[req.name]})


@operation(
    "inference_managed_delete",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/inference/managed/delete",
    completion="operation_get",
    example={"name": "qwen"},
)
async def inference_managed_delete(ctx: CallContext, req: ManagedDeleteRequest) -> OperationRef:
    """Delete a managed endpoint, an InferenceEndpointConfig or a JumpStartModel (the operator removes its
    workers, Service and SageMaker endpoint); finished when it is gone."""
    params = await blocking(_check_delete, ctx.app, req)
    return await submit_for_cluster(ctx, "inference_managed_delete", params.cluster_tag, params,
                                    status_tool="operation_get", poll_after_seconds=5)


def _gone(api: Api, p: ManagedParams) -> tuple[bool, str]:
    body = {"apiVersion": f"{iec.GROUP}/{iec.VERSION}", "kind": p.manifest.get("kind", iec.KIND),
            "metadata": {"name": p.name, "namespace": p.namespace}}
    return read_object(api, body) is None, f"{p.name}: deleting"


async def stage_delete(stage: StageContext) -> dict[str, Any]:
    """Delete the config and wait until it is gone."""
    p = stage.params_as(ManagedParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    kind = p.manifest.get("kind", iec.KIND)
    body = {"apiVersion": f"{iec.GROUP}/{iec.VERSION}", "kind": kind,
            "metadata": {"name": p.name, "namespace": p.namespace}}
    deleted = await blocking(kube_call, f"delete the {kind}", delete_object, api, body)

    async def gone() -> tuple[bool, str]:
        return await blocking(_gone, api, p)

    await wait_until(stage, gone, limit_seconds=600, what=f"deletion of {p.name}")
    return {"name": p.name, "namespace": p.namespace, "deleted": deleted}


KINDS.register(OperationKind(
    name="inference_managed_deploy", params=ManagedParams,
    stages=(StageSpec("apply", stage_apply, max_attempts=3),
            StageSpec("ready", stage_ready, max_attempts=2, timeout_seconds=READY_TIMEOUT + 300)),
    result_from=lambda outputs: outputs.get("ready", {}),
))
KINDS.register(OperationKind(name="inference_managed_delete", params=ManagedParams,
                             stages=(StageSpec("delete", stage_delete, max_attempts=3),)))
