"""Deployed model servers: list them, call one (OpenAI-style chat through the service proxy), undeploy."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from kubernetes import client as k8s
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, NotFound, ProviderError
from instantstart.kube.apply import delete_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.proxy import service_request
from instantstart.manifests import inference as m
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.services.core.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.core.stages import blocking
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName

CALL_TIMEOUT = 120.0


class ListRequest(WireModel):
    """Which cluster and namespace (every namespace when absent)."""

    namespace: KubeName | None = None
    cluster_tag: ClusterTag | None = None


class ModelService(WireModel):
    """One deployed model server."""

    name: str
    namespace: str
    engine: str
    model: str | None
    service: str | None
    service_type: str | None
    replicas_ready: int
    replicas_desired: int
    gpus_per_replica: int
    url: str | None = Field(description="In-cluster URL, or the load balancer's when external.")


class ModelServices(WireModel):
    """The model servers this control plane deployed."""

    cluster_tag: str
    services: list[ModelService]
    count: int


def _model_service(dep: Any, svc: Any) -> ModelService:
    meta = dep.metadata
    notes = meta.annotations or {}
    url = None
    if svc is not None:
        port = svc.spec.ports[0].port if svc.spec.ports else notes.get(m.ANNOTATION_PORT)
        url = f"http://{svc.metadata.name}.{meta.namespace}.svc.cluster.local:{port}"
        ingress = (svc.status.load_balancer.ingress if svc.status and svc.status.load_balancer else None) or []
        if svc.spec.type == "LoadBalancer" and ingress:
            url = f"http://{ingress[0].hostname or ingress[0].ip}:{port}"
    return ModelService(
        name=str(meta.name), namespace=str(meta.namespace),
        engine=(meta.labels or {}).get(m.LABEL_ENGINE, "other"), model=notes.get(m.ANNOTATION_MODEL),
        service=svc.metadata.name if svc is not None else None,
        service_type=svc.spec.type if svc is not None else None,
        replicas_ready=int((dep.status.ready_replicas if dep.status else 0) or 0),
        replicas_desired=int((dep.spec.replicas if dep.spec else 0) or 0),
        gpus_per_replica=int(notes.get(m.ANNOTATION_GPUS, "0") or 0), url=url,
    )


def _services(app: AppContext, row: ClusterRow, namespace: str | None) -> list[ModelService]:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    selector = f"{m.LABEL_MANAGED}={m.MANAGED_BY},{m.LABEL_ENGINE}"
    deps: Any
    svcs: Any
    if namespace:
        deps = kube_call("list deployments", apps.list_namespaced_deployment, namespace, label_selector=selector)
        svcs = kube_call("list services", core.list_namespaced_service, namespace, label_selector=m.LABEL_MANAGED)
    else:
        deps = kube_call("list deployments", apps.list_deployment_for_all_namespaces, label_selector=selector)
        svcs = kube_call("list services", core.list_service_for_all_namespaces, label_selector=m.LABEL_MANAGED)
    by_name = {(s.metadata.namespace, s.metadata.name): s for s in svcs.items or []}
    out = [
        _model_service(dep, by_name.get((dep.metadata.namespace, m.service_name(dep.metadata.name))))
        for dep in deps.items or []
    ]
    return sorted(out, key=lambda s: (s.namespace, s.name))


def cluster_row(app: AppContext, tag: str | None) -> ClusterRow:
    """The cluster a call acts on (the documented default when no tag is given). Blocking."""
    return get_cluster(app.db, resolve_tag(app.db, tag))


async def _cluster(ctx: CallContext, tag: str | None) -> ClusterRow:
    return await to_thread.run_sync(cluster_row, ctx.app, tag)


@operation("inference_list_services", method="GET", path="/inference/services", example={})
async def inference_list_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """The model servers deployed by inference_deploy_container: engine, served model, replicas ready of
    desired, GPUs per replica, Service and URL. Read-only."""
    row = await _cluster(ctx, req.cluster_tag)
    items = await blocking(_services, ctx.app, row, req.namespace)
    return ModelServices(cluster_tag=row.tag, services=items, count=len(items))


@operation("inference_list_public_services", method="GET", path="/inference/public-services", example={})
async def inference_list_public_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """Only the model servers exposed outside the cluster (LoadBalancer Services), with their URLs.
    Read-only."""
    row = await _cluster(ctx, req.cluster_tag)
    items = [s for s in await blocking(_services, ctx.app, row, req.namespace) if s.service_type == "LoadBalancer"]
    return ModelServices(cluster_tag=row.tag, services=items, count=len(items))


class CallRequest(WireModel):
    """An OpenAI-style chat request to a deployed model (the legacy snake_case names)."""

    service_name: str = Field(alias="service_name", min_length=1, max_length=63,
                              description="The deployment name or its Service (<name>-service).")
    prompt: str = Field(min_length=1, max_length=20000)
    namespace: KubeName = "default"
    max_tokens: int = Field(default=512, alias="max_tokens", ge=1, le=32768)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    cluster_tag: ClusterTag | None = None


class CallResult(WireModel):
    """The model's answer."""

    service: str
    model: str | None
    answer: str
    usage: dict[str, Any]
    finish_reason: str | None


def _call(app: AppContext, row: ClusterRow, req: CallRequest) -> CallResult:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    core = k8s.CoreV1Api(api)
    name = req.service_name if req.service_name.endswith("-service") else m.service_name(req.service_name)
    svc: Any
    try:
        svc = kube_call("read the Service", core.read_namespaced_service, name, req.namespace)
    except NotFound:
        raise NotFound(f"No model Service {req.namespace}/{name}.",
                       hint="inference_list_services lists the deployed models and their Services.") from None
    port = svc.spec.ports[0].port
    model = (svc.metadata.annotations or {}).get(m.ANNOTATION_MODEL)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": req.prompt}],
                            "max_tokens": req.max_tokens, "temperature": req.temperature}
    if model:
        body["model"] = model
    status, answer = service_request(api, req.namespace, name, port, "v1/chat/completions", body=body,
                                     timeout=CALL_TIMEOUT)
    if status != 200 or not isinstance(answer, dict):
        raise ProviderError(f"{name} answered HTTP {status}: {str(answer)[:300]}",
                            hint="Check the served model name and the server's log (pod_logs).", retryable=False)
    choice = (answer.get("choices") or [{}])[0]
    text = ((choice.get("message") or {}).get("content")) or choice.get("text") or ""
    return CallResult(service=name, model=answer.get("model") or model, answer=str(text),
                      usage=answer.get("usage") or {}, finish_reason=choice.get("finish_reason"))


@operation(
    "inference_call_model",
    method="POST",
    path="/inference/call",
    mutating=False,
    example={"service_name": "vllm-model", "prompt": "Hello"},
)
async def inference_call_model(ctx: CallContext, req: CallRequest) -> CallResult:
    """Send one OpenAI-style chat completion to a deployed model through the Kubernetes API server's service
    proxy (no public endpoint needed); answers within 120 s with the text and token usage. Read-only."""
    row = await _cluster(ctx, req.cluster_tag)
    return await blocking(_call, ctx.app, row, req)


class UndeployRequest(WireModel):
    """The deployment to remove."""

    deployment_name: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class UndeployParams(ParamsModel):
    """What undeploy records."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str


@operation(
    "inference_undeploy",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/inference/deployments/delete",
    completion="operation_get",
    example={"deploymentName": "vllm-model"},
)
async def inference_undeploy(ctx: CallContext, req: UndeployRequest) -> OperationRef:
    """Delete a model server: its Deployment (pods and their GPUs are released), Service and token Secret.
    Only deployments made by inference_deploy_container; finished when its pods are gone."""
    row = await _cluster(ctx, req.cluster_tag)
    names = {s.name for s in await blocking(_services, ctx.app, row, req.namespace)}
    if req.deployment_name not in names:
        raise InvalidInput(
            f"Invalid input: deploymentName: no model server {req.namespace}/{req.deployment_name}",
            hint=f"Deployed here: {', '.join(sorted(names)) or 'none'}.",
            details={"fields": [{"field": "deploymentName", "message": "not deployed"}]},
        )
    params = UndeployParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                            name=req.deployment_name, namespace=req.namespace)
    recorded = params.model_dump(mode="json", by_alias=True)
    return await submit_for_cluster(ctx, "inference_undeploy", row.tag, recorded, status_tool="operation_get",
                                    poll_after_seconds=5)


def _delete(app: AppContext, p: UndeployParams) -> dict[str, bool]:
    api = kube_api(app.kube, p.eks_cluster, p.region)
    objects = {
        "deployment": ("apps/v1", "Deployment", p.name),
        "service": ("v1", "Service", m.service_name(p.name)),
        "secret": ("v1", "Secret", m.token_secret_name(p.name)),
    }
    return {
        what: kube_call(f"delete the {what}", delete_object, api,
                        {"apiVersion": version, "kind": kind, "metadata": {"name": name, "namespace": p.namespace}})
        for what, (version, kind, name) in objects.items()
    }


async def stage_undeploy(stage: StageContext) -> dict[str, Any]:
    """Delete the three objects (what is already gone counts as deleted)."""
    p = stage.params_as(UndeployParams)
    deleted = await blocking(_delete, stage.app, p)
    await stage.progress(f"deleted {', '.join(k for k, v in deleted.items() if v) or 'nothing (already gone)'}")
    return {"name": p.name, "namespace": p.namespace, "deleted": deleted}


KINDS.register(OperationKind(name="inference_undeploy", params=UndeployParams,
                             stages=(StageSpec("delete", stage_undeploy, max_attempts=3),)))
