"""inference_call_model: one OpenAI-style chat request to a model, by the route its kind of deployment has.

Self-managed servers, routers and model-pool services answer through the Kubernetes API server's service proxy
(`<name>-service`); a managed endpoint (InferenceEndpointConfig or JumpStartModel) answers through the SageMaker
runtime endpoint the operator registered when it has one, else through the Service the operator created."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from instantstart.aws.sagemaker_runtime import invoke_endpoint
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import NotFound, PreconditionFailed, ProviderError
from instantstart.kube import k8s
from instantstart.kube.apply import read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.proxy import service_request
from instantstart.manifests import inference as m
from instantstart.manifests import inference_endpoint as iec
from instantstart.services.core.stages import blocking
from instantstart.services.inference.services import cluster_row
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName

CALL_TIMEOUT = 120.0
OPENAI_CHAT = "v1/chat/completions"
REGISTERED = "CreationCompleted"


class CallRequest(WireModel):
    """An OpenAI-style chat request to a deployed model (the legacy snake_case names)."""

    service_name: str = Field(alias="service_name", min_length=1, max_length=63,
                              description="A self-managed deployment or router (or its Service <name>-service), "
                              "or a managed endpoint's name (InferenceEndpointConfig or JumpStartModel).")
    prompt: str = Field(min_length=1, max_length=20000)
    namespace: KubeName = "default"
    max_tokens: int = Field(default=512, alias="max_tokens", ge=1, le=32768)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    cluster_tag: ClusterTag | None = None


class CallResult(WireModel):
    """The model's answer, and the route it took."""

    service: str
    model: str | None
    answer: str
    usage: dict[str, Any]
    finish_reason: str | None
    route: Literal["service-proxy", "sagemaker-runtime"] = Field(
        default="service-proxy", description="service-proxy (Kubernetes API server) or sagemaker-runtime "
        "(InvokeEndpoint on the endpoint the inference operator registered).")


@dataclass(frozen=True)
class Target:
    """Where a call goes: a Service (through the API server's proxy) or a SageMaker endpoint."""

    label: str
    namespace: str
    path: str
    model: str | None
    service: str | None = None
    port: int | None = None
    endpoint: str | None = None


def _crd(api: k8s.ApiClient, plural: str) -> bool:
    return read_object(api, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             "metadata": {"name": f"{plural}.{iec.GROUP}"}}) is not None


def managed_object(api: k8s.ApiClient, name: str, namespace: str) -> dict[str, Any] | None:
    """The InferenceEndpointConfig or JumpStartModel named `name` (None when neither exists or the operator is
    not installed)."""
    for kind, plural in ((iec.KIND, iec.PLURAL), (iec.JUMPSTART_KIND, iec.JUMPSTART_PLURAL)):
        if not _crd(api, plural):
            continue
        found = read_object(api, {"apiVersion": f"{iec.GROUP}/{iec.VERSION}", "kind": kind,
                                  "metadata": {"name": name, "namespace": namespace}})
        if found is not None:
            return found
    return None


def _owned_service(api: k8s.ApiClient, obj: dict[str, Any]) -> Any:
    """The Service the operator made for a managed endpoint: owned by it, preferring the one named like it."""
    meta = obj["metadata"]
    listed: Any = kube_call("list services", k8s.CoreV1Api(api).list_namespaced_service, meta["namespace"])
    owned = [s for s in listed.items or [] if any(
        o.kind == obj["kind"] and o.name == meta["name"] for o in s.metadata.owner_references or [])]
    owned.sort(key=lambda s: s.metadata.name != meta["name"])
    if not owned:
        raise PreconditionFailed(f"{obj['kind']} {meta['namespace']}/{meta['name']} has no Service yet.",
                                 hint="Wait until inference_managed_list shows it DeploymentComplete.")
    return owned[0]


def _managed_target(api: k8s.ApiClient, obj: dict[str, Any]) -> Target:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    model = iec.served_model_of(obj)
    path = str(spec.get("invocationEndpoint") or (OPENAI_CHAT if obj["kind"] == iec.KIND else "invocations"))
    endpoint = iec.endpoint_name_of(obj)
    registered = ((status.get("endpoints") or {}).get("sagemaker") or {}).get("state") == REGISTERED
    if endpoint and registered:
        return Target(label=f"SageMaker endpoint {endpoint}", namespace=meta["namespace"], path=path, model=model,
                      endpoint=endpoint)
    svc = _owned_service(api, obj)
    return Target(label=f"{meta['namespace']}/{svc.metadata.name}", namespace=meta["namespace"], path=path,
                  model=model, service=svc.metadata.name, port=svc.spec.ports[0].port)


def resolve(api: k8s.ApiClient, name: str, namespace: str) -> Target:
    """The route for `name`: `<x>-service` is a self-managed Service; a managed endpoint by its name; else the
    self-managed deployment or router `<name>` through `<name>-service`."""
    if not name.endswith("-service"):
        obj = managed_object(api, name, namespace)
        if obj is not None:
            return _managed_target(api, obj)
    service = name if name.endswith("-service") else m.service_name(name)
    svc: Any
    try:
        svc = kube_call("read the Service", k8s.CoreV1Api(api).read_namespaced_service, service, namespace)
    except NotFound:
        raise NotFound(f"No model Service {namespace}/{service} and no managed endpoint {namespace}/{name}.",
                       hint="inference_list_services and inference_managed_list list what is deployed.") from None
    return Target(label=f"{namespace}/{service}", namespace=namespace, path=OPENAI_CHAT,
                  model=(svc.metadata.annotations or {}).get(m.ANNOTATION_MODEL), service=service,
                  port=svc.spec.ports[0].port)


def _call(app: AppContext, row: ClusterRow, req: CallRequest) -> CallResult:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    target = resolve(api, req.service_name, req.namespace)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": req.prompt}],
                            "max_tokens": req.max_tokens, "temperature": req.temperature}
    if target.model:
        body["model"] = target.model
    if target.endpoint is not None:
        status, answer = 200, invoke_endpoint(app.aws, row.region, target.endpoint, body)
    else:
        assert target.service is not None and target.port is not None
        status, answer = service_request(api, target.namespace, target.service, target.port, target.path, body=body,
                                         timeout=CALL_TIMEOUT)
    if status != 200 or not isinstance(answer, dict):
        raise ProviderError(f"{target.label} answered HTTP {status}: {str(answer)[:300]}",
                            hint="Check the served model name and the server's log (pod_logs).", retryable=False)
    choice = (answer.get("choices") or [{}])[0]
    text = ((choice.get("message") or {}).get("content")) or choice.get("text") or answer.get("generated_text") or ""
    return CallResult(service=target.endpoint or target.service or req.service_name,
                      model=answer.get("model") or target.model, answer=str(text), usage=answer.get("usage") or {},
                      finish_reason=choice.get("finish_reason"),
                      route="sagemaker-runtime" if target.endpoint else "service-proxy")


@operation(
    "inference_call_model",
    method="POST",
    path="/inference/call",
    side_effecting=True,
    example={"service_name": "vllm-model", "prompt": "Hello"},
)
async def inference_call_model(ctx: CallContext, req: CallRequest) -> CallResult:
    """Send one OpenAI-style chat completion to a deployed model and return the text and token usage (within
    120 s). Self-managed models and routers answer through the Kubernetes API server's service proxy (no public
    endpoint needed); a managed endpoint (inference_managed_deploy, inference_jumpstart_deploy) through the
    SageMaker runtime endpoint the operator registered (InvokeEndpoint), else through its Service."""
    row = await blocking(cluster_row, ctx.app, req.cluster_tag)
    return await blocking(_call, ctx.app, row, req)
