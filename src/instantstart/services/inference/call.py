"""inference_call_model: one OpenAI-style chat request to a model, by the route its kind of deployment has.

Self-managed servers, routers and model-pool services answer through the Kubernetes API server's service proxy
(`<name>-service`); a managed endpoint (InferenceEndpointConfig or JumpStartModel) answers through the SageMaker
runtime endpoint the operator registered when it has one, else through the Service the operator created."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from instantstart.aws.sagemaker_runtime import invoke_endpoint
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import Conflict, NotFound, PreconditionFailed, ProviderError
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import read_object
from instantstart.kube.balancer import balancer_request
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.proxy import service_request
from instantstart.kube.wire import Obj
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import inference_endpoint as iec
from instantstart.operations.waiting import blocking
from instantstart.services.inference.call_balancer import through_balancer
from instantstart.services.inference.services import cluster_row
from instantstart.store.models import ClusterRow
from instantstart.validation import INVOCATION_PATH_RULE, ClusterTag, KubeName, invocation_path

CALL_TIMEOUT = 120.0
OPENAI_CHAT = "v1/chat/completions"
REGISTERED = "CreationCompleted"
SAGEMAKER_ENDPOINT = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# A model's answer is data shown to the caller: clipped, never parsed further or acted on.
MAX_ANSWER = 65536
MAX_FIELD = 256


class CallRequest(WireModel):
    """An OpenAI-style chat request to a deployed model (the legacy snake_case names)."""

    service_name: KubeName = Field(alias="service_name", min_length=1, max_length=63,
                                   description="A self-managed deployment or router (or its Service "
                                   "<name>-service), or a managed endpoint's name (InferenceEndpointConfig or "
                                   "JumpStartModel). A DNS-1123 label.")
    prompt: str = Field(min_length=1, max_length=20000)
    namespace: KubeName = "default"
    max_tokens: int = Field(default=512, alias="max_tokens", ge=1, le=32768)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    kind: Literal["managed", "self-managed"] | None = Field(
        default=None, description="Which one to call when a managed endpoint and a self-managed deployment share "
        "service_name (such a call is refused without it).")
    via: Literal["service-proxy", "load-balancer"] | None = Field(
        default=None, description="Self-managed servers only. Default: the API server's service proxy, or the load "
        "balancer when the server demands an API key (the proxy cannot carry it). load-balancer: call an external "
        "server at its Service's load balancer address (this control plane must be in its sourceRanges).")
    local_port: int | None = Field(default=None, alias="local_port", ge=1, le=65535,
                                   description="Accepted for the original tool and ignored: no port-forward is "
                                   "needed (the answer's note says so).")
    cluster_tag: ClusterTag | None = None


class CallResult(WireModel):
    """The model's answer (data: clipped to 65,536 characters, never interpreted), and the route it took."""

    service: str
    model: str | None
    answer: str
    answer_truncated: bool = Field(default=False, description="True when the answer was clipped.")
    usage: dict[str, int]
    finish_reason: str | None
    route: Literal["service-proxy", "sagemaker-runtime", "load-balancer"] = Field(
        default="service-proxy", description="service-proxy (Kubernetes API server), sagemaker-runtime "
        "(InvokeEndpoint on the endpoint the inference operator registered) or load-balancer (the address of the "
        "Service InstantStart created).")
    note: str | None = Field(default=None, description="Set when an argument was accepted but ignored (local_port).")


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
    keyed: bool = False  # a self-managed server whose `<name>-api-key` Secret exists
    self_managed: bool = False
    address: str | None = None  # its load balancer's, when the call goes there
    api_key: str | None = field(default=None, repr=False)


def _crd(api: Api, plural: str) -> bool:
    return read_object(api, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             "metadata": {"name": f"{plural}.{iec.GROUP}"}}) is not None


def managed_object(api: Api, name: str, namespace: str) -> dict[str, Any] | None:
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


def owned_by(svc: Obj, obj: dict[str, Any]) -> bool:
    """Whether `svc` names `obj` as an owner by its uid (a kind and name alone can be written by anyone who can
    create a Service in the namespace, for an object that is not theirs)."""
    uid = obj["metadata"].get("uid")
    group = str(obj.get("apiVersion", "")).split("/")[0]
    return bool(uid) and any(o.get("uid") == uid and o.get("kind") == obj["kind"]
                             and str(o.get("apiVersion")).split("/")[0] == group
                             for o in wire.owner_references(svc))


def _owned_service(api: Api, obj: dict[str, Any]) -> Obj:
    """The Service the operator made for a managed endpoint: owned by it (uid), preferring the one named like it."""
    meta = obj["metadata"]
    listed = kube_call("list services", core_kinds.list_services, api, meta["namespace"])
    owned = [s for s in wire.items(listed) if owned_by(s, obj)]
    owned.sort(key=lambda s: wire.name(s) != meta["name"])
    if not owned:
        raise PreconditionFailed(f"{obj['kind']} {meta['namespace']}/{meta['name']} has no Service yet.",
                                 hint="Wait until inference_managed_list shows it DeploymentComplete.")
    return owned[0]


def _refuse_field(obj: dict[str, Any], field: str, value: Any, rule: str) -> PreconditionFailed:
    meta = obj["metadata"]
    return PreconditionFailed(
        f"{obj['kind']} {meta['namespace']}/{meta['name']}: spec.{field} {str(value)[:100]!r} is not {rule}; "
        "the control plane follows no such path or name from a cluster object. Nothing was sent.",
        hint=f"Set spec.{field} to {rule} (redeploy with inference_managed_deploy), or ask the namespace's owner.",
        details={"object": f"{meta['namespace']}/{meta['name']}", "field": f"spec.{field}"})


def _managed_target(api: Api, obj: dict[str, Any]) -> Target:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    model = iec.served_model_of(obj)
    given = spec.get("invocationEndpoint") if obj["kind"] == iec.KIND else None
    try:
        path = invocation_path(str(given)) if given else iec.DEFAULT_INVOCATION  # the CRD's default, for both kinds
    except ValueError:
        raise _refuse_field(obj, "invocationEndpoint", given, INVOCATION_PATH_RULE) from None
    endpoint = iec.endpoint_name_of(obj)
    sagemaker = (status.get("endpoints") or {}).get("sagemaker") or {}
    if endpoint and sagemaker.get("state") == REGISTERED:
        if not SAGEMAKER_ENDPOINT.match(endpoint):
            raise _refuse_field(obj, "endpointName", endpoint, "a SageMaker endpoint name (1-63 letters, digits, '-')")
        # The operator records the endpoint it registered in the status (a subresource a tenant who may edit the
        # spec need not be able to write): a spec naming another endpoint of the account is not followed.
        if str(sagemaker.get("endpointArn") or "").rsplit(":endpoint/", 1)[-1] != endpoint.lower():
            raise _refuse_field(obj, "endpointName", endpoint, "the endpoint the operator registered for it "
                                f"(status.endpoints.sagemaker.endpointArn {str(sagemaker.get('endpointArn'))[:120]})")
        return Target(label=f"SageMaker endpoint {endpoint}", namespace=meta["namespace"], path=path, model=model,
                      endpoint=endpoint)
    svc = _owned_service(api, obj)
    return Target(label=f"{meta['namespace']}/{wire.name(svc)}", namespace=meta["namespace"], path=path,
                  model=model, service=wire.name(svc), port=wire.ports(svc)[0]["port"])


def _read_service(api: Api, name: str, namespace: str) -> Obj | None:
    try:
        return kube_call("read the Service", core_kinds.read_service, api, name, namespace)
    except NotFound:
        return None


def _ambiguous(obj: dict[str, Any], service: str, namespace: str) -> Conflict:
    name = obj["metadata"]["name"]
    return Conflict(f"{name!r} names both the {obj['kind']} {namespace}/{name} (managed) and the self-managed "
                    f"Service {namespace}/{service}; nothing was sent.",
                    hint='Say which with kind: "managed" or kind: "self-managed" (or call service_name '
                    f"{service} for the self-managed one).",
                    details={"managed": f"{obj['kind']} {namespace}/{name}",
                             "selfManaged": f"Service {namespace}/{service}"})


def resolve(api: Api, name: str, namespace: str, kind: str | None = None) -> Target:
    """The route for `name`: `<x>-service` is a self-managed Service; a managed endpoint by its name; else the
    self-managed deployment or router `<name>` through `<name>-service`. A name that is both a managed endpoint and
    a self-managed deployment is refused unless `kind` says which."""
    obj = None
    if kind == "managed" or (kind is None and not name.endswith("-service")):
        obj = managed_object(api, name, namespace)
        if obj is None and kind == "managed":
            raise NotFound(f"No managed endpoint {namespace}/{name} (InferenceEndpointConfig or JumpStartModel).",
                           hint="inference_managed_list lists the managed endpoints.")
    service = name if name.endswith("-service") and obj is None else inference_manifests.service_name(name)
    svc = None if kind == "managed" else _read_service(api, service, namespace)
    if obj is not None:
        if svc is not None and not owned_by(svc, obj):
            raise _ambiguous(obj, service, namespace)
        return _managed_target(api, obj)
    if svc is None:
        raise NotFound(f"No model Service {namespace}/{service} and no managed endpoint {namespace}/{name}.",
                       hint="inference_list_services and inference_managed_list list what is deployed.")
    keyed = _has_key(api, service.removesuffix("-service"), namespace)
    return Target(label=f"{namespace}/{service}", namespace=namespace, path=OPENAI_CHAT,
                  model=wire.annotations(svc).get(inference_manifests.ANNOTATION_MODEL), service=service,
                  port=wire.ports(svc)[0]["port"], keyed=keyed, self_managed=True)


def _has_key(api: Api, deployment: str, namespace: str) -> bool:
    """Whether the server was started with an API key: the Kubernetes API server's proxy consumes the Authorization
    header (it authenticates the control plane) and never forwards it, so such a server is called at its load
    balancer. The Secret's name comes from the deployment's name, never from a cluster object's field."""
    return read_object(api, {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": inference_manifests.api_key_secret_name(deployment), "namespace": namespace}}) is not None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clip(value: Any, limit: int = MAX_FIELD) -> str | None:
    return None if value is None else str(value)[:limit]


def _result(target: Target, name: str, answer: dict[str, Any]) -> CallResult:
    """The answer as data: text clipped, model and finish reason clipped, usage only whole numbers."""
    choices = answer.get("choices")
    choice: dict[str, Any] = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
        else {}
    message = _mapping(choice.get("message"))
    text = str(message.get("content") or choice.get("text") or answer.get("generated_text") or "")
    usage = _mapping(answer.get("usage"))
    counts = {str(k)[:64]: v for k, v in list(usage.items())[:16] if isinstance(v, int) and not isinstance(v, bool)}
    return CallResult(service=target.endpoint or target.service or name,
                      model=_clip(answer.get("model") or target.model), answer=text[:MAX_ANSWER],
                      answer_truncated=len(text) > MAX_ANSWER, usage=counts,
                      finish_reason=_clip(choice.get("finish_reason"), 64),
                      route="sagemaker-runtime" if target.endpoint else "load-balancer" if target.address
                      else "service-proxy")


def _call(app: AppContext, row: ClusterRow, req: CallRequest) -> CallResult:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    target = resolve(api, req.service_name, req.namespace, req.kind)
    if req.via is not None and not target.self_managed:
        raise PreconditionFailed(f"via {req.via} is for self-managed servers; {target.label} is a managed endpoint.",
                                 hint="Leave via out.", details={"fields": [{"field": "via"}]})
    if target.self_managed and (target.keyed or req.via == "load-balancer"):
        if req.via == "service-proxy" and target.keyed:
            raise PreconditionFailed(f"{target.label} demands an API key, which the API server's proxy does not "
                                     "forward. Nothing was sent.", hint="Leave via out to call its load balancer.")
        target = through_balancer(app, row, api, target, keyed=target.keyed)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": req.prompt}],
                            "max_tokens": req.max_tokens, "temperature": req.temperature}
    if target.model:
        body["model"] = target.model[:MAX_FIELD]
    if target.endpoint is not None:
        status, answer = 200, invoke_endpoint(app.aws, row.region, target.endpoint, body)
    elif target.address is not None:
        assert target.port is not None
        status, answer = balancer_request(target.address, target.port, target.path, body=body,
                                          api_key=target.api_key, timeout=CALL_TIMEOUT)
    else:
        assert target.service is not None and target.port is not None
        status, answer = service_request(api, target.namespace, target.service, target.port, target.path, body=body,
                                         timeout=CALL_TIMEOUT)
    if status != 200 or not isinstance(answer, dict):
        raise ProviderError(f"{target.label} answered HTTP {status}: {str(answer)[:300]!r}",
                            hint="Check the served model name and the server's log (pod_logs).", retryable=False)
    result = _result(target, req.service_name, answer)
    if req.local_port is not None:
        result.note = (f"local_port {req.local_port} was ignored: no port-forward is needed, the call went through "
                       f"the {result.route} route.")
    return result


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
    SageMaker runtime endpoint the operator registered (InvokeEndpoint), else through its Service. A self-managed
    server with an API key (or any external one with via load-balancer) is called at the load balancer address of
    the Service InstantStart created for it (checked by uid), with the key from its Secret; this control plane's
    address must be in its sourceRanges. local_port is accepted and ignored (no port-forward)."""
    row = await blocking(cluster_row, ctx.app, req.cluster_tag)
    return await blocking(_call, ctx.app, row, req)
