"""inference_jumpstart_deploy: a SageMaker JumpStart model through the inference operator's JumpStartModel."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.aws.jumpstart_hub import PUBLIC_HUB, HubModel, describe_model
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, PreconditionFailed, ProviderError
from instantstart.kube.apply import apply_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import inference_endpoint as iec
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import resolve_tag, submit_for_cluster
from instantstart.services.core.instance_types import catalog
from instantstart.services.inference.managed import ManagedParams
from instantstart.services.inference.services import cluster_row
from instantstart.services.teams.placement import in_team_namespace
from instantstart.validation import ClusterTag, KubeName

KIND = "inference_jumpstart_deploy"
CRD = f"{iec.JUMPSTART_PLURAL}.{iec.GROUP}"
READY_TIMEOUT = 3600
SAGEMAKER_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"


class JumpStartRequest(WireModel):
    """A JumpStart model to serve (the `hyp create hyp-jumpstart-endpoint` inputs)."""

    model_id: str = Field(pattern=SAGEMAKER_NAME, description="JumpStart model id, e.g. "
                          "huggingface-llm-qwen2-5-7b-instruct.")
    model_version: str | None = Field(default=None, pattern=r"^\d{1,4}\.\d{1,4}\.\d{1,4}$",
                                      description="Default: the hub's latest.")
    instance_type: str = Field(pattern=r"^ml\..+$", description="A GPU instance type of the cluster.")
    endpoint_name: str | None = Field(default=None, pattern=SAGEMAKER_NAME,
                                      description="SageMaker endpoint the operator registers (InvokeEndpoint); "
                                      "default: the model's name.")
    sagemaker_endpoint: bool = Field(default=True, description="Register a SageMaker endpoint (spec.sageMakerEndpoint"
                                     ".name). false: none is registered; the model is reached through the Service the "
                                     "operator makes (inference_call_model goes through the API server's proxy).")
    name: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                             description="The JumpStartModel's name (default: modelId, lower-cased, 63 chars).")
    accept_eula: bool = Field(default=False, description="Required true for models with an end-user licence.")
    replicas: int = Field(default=1, ge=1, le=64)
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


def _hub_model(app: AppContext, region: str, req: JumpStartRequest) -> HubModel:
    """The hub's facts for the model, refusing a model or version it lacks or an instance type it does not support
    (before anything is applied; the HyperPod CLI checks the same document)."""
    model = describe_model(app.aws, region, req.model_id, req.model_version)
    if model is None:
        what = f"{req.model_id} version {req.model_version}" if req.model_version else req.model_id
        field = "modelVersion" if req.model_version else "modelId"
        raise InvalidInput(f"Invalid input: {field}: {what} is not a model of the JumpStart hub {PUBLIC_HUB} "
                           f"in {region}.", hint="Use a JumpStart model id (and version) from the hub, e.g. "
                           "aws sagemaker list-hub-contents --hub-name SageMakerPublicHub --hub-content-type Model.",
                           details={"fields": [{"field": field, "message": "not in the public hub"}]})
    if req.instance_type not in model.supported_types:
        supported = ", ".join(model.supported_types) or "none"
        raise InvalidInput(
            f"Invalid input: instanceType: {req.instance_type} is not supported by JumpStart model {model.model_id} "
            f"{model.version}; supported: {supported}.",
            hint=f"Use one of the model's instance types (the hub's default is {model.default_type}) that the "
            "cluster has, or another model.",
            details={"fields": [{"field": "instanceType", "message": "not supported by the model",
                                 "allowed": list(model.supported_types)}]})
    return model


def _check(app: AppContext, req: JumpStartRequest) -> ManagedParams:
    facts = catalog().get(req.instance_type)
    if facts is None or facts.gpus == 0:
        what = "is not a known instance type" if facts is None else "has no NVIDIA GPU"
        raise InvalidInput(f"Invalid input: instanceType: {req.instance_type} {what}",
                           hint="Use a GPU instance type of the cluster (g5, g6, g6e, p4d, p5 …).",
                           details={"fields": [{"field": "instanceType", "message": what}]})
    if req.endpoint_name and not req.sagemaker_endpoint:
        raise InvalidInput("Invalid input: endpointName: given with sagemakerEndpoint false (no endpoint is "
                           "registered)", hint="Drop endpointName, or set sagemakerEndpoint true.",
                           details={"fields": [{"field": "endpointName", "message": "needs sagemakerEndpoint"}]})
    row = cluster_row(app, req.cluster_tag)
    hub = _hub_model(app, row.region, req)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    if read_object(api, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": CRD}}) is None:
        raise PreconditionFailed(f"The HyperPod inference operator is not installed on {row.tag} (no {CRD}).",
                                 hint='Enable it: hyperpod_update_advanced_features {"inferenceOperator": '
                                 '{"enabled": true}}.')
    name = req.name or req.model_id.lower()[:63].rstrip("-")
    endpoint = (req.endpoint_name or name) if req.sagemaker_endpoint else None
    # The version whose instance types were checked is the one deployed (not whatever is latest when it applies).
    manifest = iec.jumpstart_model(name, req.namespace, req.model_id, req.instance_type,
                                   model_version=hub.version or req.model_version, endpoint_name=endpoint,
                                   accept_eula=req.accept_eula, replicas=req.replicas)
    return ManagedParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name, name=name,
                         namespace=req.namespace, manifest=manifest)


@operation(
    "inference_jumpstart_deploy",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/jumpstart",
    completion="operation_get",
    example={"modelId": "huggingface-llm-qwen2-5-7b-instruct", "instanceType": "ml.g6.4xlarge"},
)
async def inference_jumpstart_deploy(ctx: CallContext, req: JumpStartRequest) -> OperationRef:
    """Deploy a SageMaker JumpStart model through the HyperPod inference operator (a JumpStartModel: model id and
    version, instance type, replicas) and register its SageMaker endpoint (unless sagemakerEndpoint is false);
    finished when the model is DeploymentComplete and the endpoint, if any, is registered. Refused before anything is
    applied when the JumpStart hub does not list instanceType among the model's supported types (the error names
    them). Call it with inference_call_model service_name=<name> (InvokeEndpoint, else its Service). Needs the
    operator (inferenceOperator advanced feature)."""
    tag = await blocking(resolve_tag, ctx.app.db, req.cluster_tag)
    req = await in_team_namespace(ctx, tag, req.model_copy(update={"cluster_tag": tag}))
    params = await blocking(_check, ctx.app, req)
    return await submit_for_cluster(ctx, KIND, params.cluster_tag, params, status_tool="operation_get",
                                    poll_after_seconds=15, workload=(params.namespace, params.name))


async def stage_apply(stage: StageContext) -> dict[str, Any]:
    """Server-side apply the JumpStartModel."""
    p = stage.params_as(ManagedParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    await blocking(kube_call, "apply the JumpStartModel", apply_object, api, p.manifest)
    return {"name": p.name, "namespace": p.namespace}


def _state(api: Api, p: ManagedParams) -> tuple[bool, str]:
    found = read_object(api, {"apiVersion": f"{iec.GROUP}/{iec.VERSION}", "kind": iec.JUMPSTART_KIND,
                              "metadata": {"name": p.name, "namespace": p.namespace}})
    if found is None:
        return False, f"{p.name}: not created yet"
    state, message = iec.state_of(found)
    if state in ("DeploymentFailed", "Failed"):
        raise ProviderError(f"{p.name}: {state}: {message}", hint="Check the model's pod log (pod_logs), the "
                            "instance type and acceptEula.", retryable=False)
    if iec.endpoint_name_of(p.manifest) is None:
        return state == "DeploymentComplete", f"{p.name}: {state} {message}".strip()
    sagemaker = ((found.get("status") or {}).get("endpoints") or {}).get("sagemaker") or {}
    registered = sagemaker.get("state") == "CreationCompleted"
    return state == "DeploymentComplete" and registered, (
        f"{p.name}: {state} {message}; SageMaker endpoint {sagemaker.get('state', 'not registered yet')}")


async def stage_ready(stage: StageContext) -> dict[str, Any]:
    """Wait for DeploymentComplete and the registered SageMaker endpoint (when one was asked for)."""
    p = stage.params_as(ManagedParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)

    async def ready() -> tuple[bool, str]:
        return await blocking(_state, api, p)

    await wait_until(stage, ready, limit_seconds=READY_TIMEOUT, what=f"JumpStart model {p.name}")
    endpoint = iec.endpoint_name_of(p.manifest)
    model = p.manifest["spec"]["model"]
    return {"name": p.name, "namespace": p.namespace, "state": "DeploymentComplete", "endpointName": endpoint,
            "route": "sagemaker-runtime" if endpoint else "service-proxy", "modelId": model["modelId"],
            "modelVersion": model.get("modelVersion")}


KINDS.register(OperationKind(
    name=KIND, params=ManagedParams,
    stages=(StageSpec("apply", stage_apply, max_attempts=3),
            StageSpec("ready", stage_ready, max_attempts=2, timeout_seconds=READY_TIMEOUT + 300)),
    result_from=lambda outputs: outputs.get("ready", {}),
))
