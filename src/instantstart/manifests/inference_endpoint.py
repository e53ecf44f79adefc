"""Managed inference: the InferenceEndpointConfig (HyperPod inference operator) and its lint rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from instantstart.manifests import endpoint_autoscaling as scaling
from instantstart.manifests import inference as inference_manifests
from instantstart.validation import INVOCATION_PATH_RULE, invocation_path

GROUP = "inference.sagemaker.aws.amazon.com"
VERSION = "v1"
PLURAL = "inferenceendpointconfigs"
KIND = "InferenceEndpointConfig"
JUMPSTART_KIND = "JumpStartModel"
JUMPSTART_PLURAL = "jumpstartmodels"
MODEL_MOUNT = "/opt/ml/model"
KUBE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
HF_MODEL = re.compile(r"^[\w.-]+/[\w.-]+$")
REDIS_URL = re.compile(r"^rediss?://[^\s/:]+:\d{1,5}(/\d+)?$")
KV_ENGINES = ("vllm",)
STRATEGIES = ("prefixaware", "kvaware", "session", "roundrobin")
# The operator's own default (the CRD's invocationEndpoint default): the SageMaker-compatible route vLLM, SGLang, LMI
# and TGI all serve (vLLM and SGLang route an OpenAI chat body posted there to their chat completions), and the path
# SageMaker runtime InvokeEndpoint forwards to. An OpenAI route (v1/chat/completions) is a deliberate choice.
DEFAULT_INVOCATION = "invocations"


@dataclass(frozen=True)
class EndpointSpec:
    """Everything an InferenceEndpointConfig is rendered from."""

    name: str
    namespace: str
    model_name: str
    image: str
    instance_type: str
    gpu_count: int
    source_type: str
    invocation_port: int = 8000
    args: list[str] = field(default_factory=list)
    served_model_name: str | None = None
    endpoint_name: str | None = None
    replicas: int = 1
    cpu: str | None = None
    memory: str | None = None
    model_location: str | None = None
    s3_bucket: str | None = None
    s3_region: str | None = None
    fsx_file_system_id: str | None = None
    fsx_dns_name: str | None = None
    fsx_mount_name: str | None = None
    hugging_face_model_id: str | None = None
    kv_l1: bool = False
    kv_l2: bool = False
    l2_backend: str | None = None
    l2_url: str | None = None
    routing_strategy: str | None = None
    tls_output_s3_uri: str | None = None
    invocation_endpoint: str = DEFAULT_INVOCATION
    autoscaling: scaling.Autoscaling | None = None


@dataclass(frozen=True)
class Finding:
    """One lint finding: a stable code, the field, what is wrong and how to fix it."""

    code: str
    field: str
    message: str
    fix: str
    severity: str = "error"


def engine(spec: EndpointSpec) -> inference_manifests.Engine:
    """The serving engine, from the image and the worker's arguments."""
    return inference_manifests.engine_of(spec.args or [spec.image], spec.image)


def _names(spec: EndpointSpec) -> list[Finding]:
    out = []
    if not KUBE_NAME.match(spec.name):
        out.append(Finding("IEC003", "name", f"{spec.name!r} is not a Kubernetes name of at most 63 characters "
                           "(lower-case letters, digits, '-')", "Use a shorter lower-case DNS label."))
    for fname, value in (("modelName", spec.model_name), ("endpointName", spec.endpoint_name)):
        if value is not None and not SAGEMAKER_NAME.match(value):
            out.append(Finding("IEC003", fname, f"{value!r} must be 1-63 letters, digits or '-' (SageMaker limit), "
                               f"starting and ending with a letter or digit ({len(value)} characters)",
                               f"Shorten {fname} to 63 characters or fewer without other symbols."))
    return out


def _port_and_model(spec: EndpointSpec) -> list[Finding]:
    out = []
    eng = engine(spec)
    if eng.name != "other":
        listening = inference_manifests.listening_port(spec.args, eng, None) if spec.args else eng.port
        if listening != spec.invocation_port:
            out.append(Finding("IEC001", "invocationPort", f"{eng.name} listens on {listening}, but invocationPort "
                               f"is {spec.invocation_port}", f"Set invocationPort to {listening}, or add "
                               f"`--port {spec.invocation_port}` to args."))
    in_args = inference_manifests.flag(spec.args, "--served-model-name")
    if in_args and spec.served_model_name and in_args != spec.served_model_name:
        out.append(Finding("IEC002", "servedModelName", f"args serve {in_args!r} but servedModelName is "
                           f"{spec.served_model_name!r}", "Use one name in both places (clients send it as `model`)."))
    return out


def _source(spec: EndpointSpec) -> list[Finding]:
    needs = {"s3": [("s3Bucket", spec.s3_bucket), ("s3Region", spec.s3_region)],
             "fsx": [("fsxFileSystemId", spec.fsx_file_system_id)],
             "huggingface": [("huggingFaceModelId", spec.hugging_face_model_id)]}.get(spec.source_type, [])
    out = [Finding("IEC008", f, f"required when modelSource is {spec.source_type}", f"Give {f}.")
           for f, v in needs if not v]
    if spec.hugging_face_model_id and not HF_MODEL.match(spec.hugging_face_model_id):
        out.append(Finding("IEC008", "huggingFaceModelId", f"{spec.hugging_face_model_id!r} is not `org/model`",
                           "Use the model's Hugging Face id, e.g. Qwen/Qwen3-0.6B."))
    if spec.tls_output_s3_uri and not spec.tls_output_s3_uri.startswith("s3://"):
        out.append(Finding("IEC009", "tlsOutputS3Uri", "must be an s3:// URI", "Use s3://<bucket>/<prefix>."))
    try:
        invocation_path(spec.invocation_endpoint)
    except ValueError:
        out.append(Finding("IEC010", "invocationEndpoint", f"{spec.invocation_endpoint[:100]!r} must be "
                           f"{INVOCATION_PATH_RULE}",
                           f"Use the server's path: {DEFAULT_INVOCATION} (the default) or e.g. v1/chat/completions."))
    return out


def _cache_and_routing(spec: EndpointSpec) -> list[Finding]:
    out = []
    eng = engine(spec)
    if (spec.kv_l1 or spec.kv_l2) and eng.name not in KV_ENGINES:
        out.append(Finding("IEC004", "kvCache", f"managed KV cache works with {', '.join(KV_ENGINES)} only; the "
                           f"engine here is {eng.name}", "Turn kvCache off, or serve with a vLLM image."))
    if spec.kv_l2 and not spec.l2_backend:
        out.append(Finding("IEC005", "kvCache.l2Backend", "required when the L2 cache is on",
                           "Set l2Backend to tieredstorage or redis."))
    if spec.l2_backend and not spec.kv_l2:
        out.append(Finding("IEC005", "kvCache.enableL2", f"l2Backend {spec.l2_backend} is set but L2 is off",
                           "Set enableL2 true, or drop l2Backend."))
    if spec.l2_backend == "redis" and not (spec.l2_url and REDIS_URL.match(spec.l2_url)):
        out.append(Finding("IEC005", "kvCache.l2Url", "the redis backend needs redis://<host>:<port>",
                           "Give l2Url, e.g. redis://redis.default.svc.cluster.local:6379."))
    if spec.l2_backend == "tieredstorage" and spec.l2_url:
        out.append(Finding("IEC005", "kvCache.l2Url", "tieredstorage takes no URL (it is the cluster's managed "
                           "tiered storage)", "Drop l2Url, or use the redis backend."))
    if spec.routing_strategy == "kvaware" and not (spec.kv_l1 or spec.kv_l2):
        out.append(Finding("IEC006", "routingStrategy", "kvaware routing follows KV cache events: the KV cache is "
                           "off", "Turn on kvCache (enableL1), or use prefixaware."))
    if spec.routing_strategy and spec.replicas < 2:
        out.append(Finding("IEC006", "replicas", f"{spec.routing_strategy} routing has one replica to route to",
                           "Use replicas >= 2 for routing to matter.", severity="warning"))
    return out


def _gpus(spec: EndpointSpec, gpus_per_node: int | None) -> list[Finding]:
    out = []
    if gpus_per_node is None:
        out.append(Finding("IEC007", "instanceType", f"{spec.instance_type} is not a known instance type",
                           "Use an ml.* GPU instance type, e.g. ml.g6.4xlarge."))
    elif gpus_per_node == 0:
        out.append(Finding("IEC007", "instanceType", f"{spec.instance_type} has no NVIDIA GPU",
                           "Use a GPU instance type (g5, g6, g6e, p4d, p5 …)."))
    elif spec.gpu_count > gpus_per_node:
        out.append(Finding("IEC007", "gpuCount", f"{spec.instance_type} has {gpus_per_node} GPU(s), fewer than "
                           f"gpuCount {spec.gpu_count}", f"Lower gpuCount to {gpus_per_node} or a larger type."))
    try:
        tp, pp = inference_manifests.parallelism(spec.args)
    except inference_manifests.CommandError as exc:
        return [*out, Finding("IEC007", "args", str(exc), "Give whole numbers.")]
    if tp * pp > spec.gpu_count:
        out.append(Finding("IEC007", "gpuCount", f"args ask for tensor x pipeline parallel {tp * pp} GPUs, "
                           f"gpuCount is {spec.gpu_count}", f"Set gpuCount to {tp * pp}."))
    return out


def _autoscaling(spec: EndpointSpec) -> list[Finding]:
    if spec.autoscaling is None:
        return []
    return [Finding("IEC011", fname, message, fix, severity)
            for fname, message, fix, severity in scaling.problems(spec.autoscaling, spec.replicas)]


def lint(spec: EndpointSpec, gpus_per_node: int | None) -> list[Finding]:
    """Every rule, in code order; `gpus_per_node` is the instance type's GPUs (None when unknown)."""
    found = [*_names(spec), *_port_and_model(spec), *_source(spec), *_cache_and_routing(spec),
             *_gpus(spec, gpus_per_node), *_autoscaling(spec)]
    return sorted(found, key=lambda f: f.code)


def _source_config(spec: EndpointSpec) -> dict[str, Any]:
    source: dict[str, Any] = {"modelSourceType": spec.source_type}
    if spec.model_location:
        source["modelLocation"] = spec.model_location
    if spec.source_type == "s3":
        source["s3Storage"] = {"bucketName": spec.s3_bucket, "region": spec.s3_region}
    elif spec.source_type == "fsx":
        fsx = {"fileSystemId": spec.fsx_file_system_id, "dnsName": spec.fsx_dns_name,
               "mountName": spec.fsx_mount_name}
        source["fsxStorage"] = {k: v for k, v in fsx.items() if v}
    elif spec.source_type == "huggingface":
        source["huggingFaceModel"] = {"modelId": spec.hugging_face_model_id}
    return source


def endpoint_config(spec: EndpointSpec) -> dict[str, Any]:
    """The InferenceEndpointConfig (FACTS §6.2), labelled as made by this control plane."""
    requests: dict[str, str] = {inference_manifests.GPU: str(spec.gpu_count)}
    if spec.cpu:
        requests["cpu"] = spec.cpu
    if spec.memory:
        requests["memory"] = spec.memory
    worker: dict[str, Any] = {
        "image": spec.image,
        "resources": {"requests": requests, "limits": {inference_manifests.GPU: str(spec.gpu_count)}},
        "modelInvocationPort": {"containerPort": spec.invocation_port, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT},
    }
    if spec.args:
        worker["args"] = list(spec.args)
    body: dict[str, Any] = {
        "modelName": spec.model_name, "instanceType": spec.instance_type, "replicas": spec.replicas,
        "invocationEndpoint": spec.invocation_endpoint, "modelSourceConfig": _source_config(spec), "worker": worker,
    }
    if spec.endpoint_name:
        body["endpointName"] = spec.endpoint_name
    if spec.kv_l1 or spec.kv_l2:
        kv: dict[str, Any] = {"enableL1Cache": spec.kv_l1, "enableL2Cache": spec.kv_l2}
        if spec.kv_l2 and spec.l2_backend:
            kv["l2CacheSpec"] = {"l2CacheBackend": spec.l2_backend, **({"l2CacheLocalUrl": spec.l2_url}
                                                                        if spec.l2_url else {})}
        body["kvCacheSpec"] = kv
    if spec.routing_strategy:
        body["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": spec.routing_strategy}
    if spec.autoscaling is not None:
        body["autoScalingSpec"] = scaling.render(spec.autoscaling)
    if spec.tls_output_s3_uri:
        body["tlsConfig"] = {"tlsCertificateOutputS3Uri": spec.tls_output_s3_uri}
    labels = {
        inference_manifests.LABEL_MANAGED: inference_manifests.MANAGED_BY,
        inference_manifests.LABEL_APP: spec.name,
    }
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels}, "spec": body}


def state_of(iec: dict[str, Any]) -> tuple[str, str]:
    """(state, message) from the IEC's status: the True condition wins, else status.state, else Pending."""
    status = iec.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True":
            return str(cond.get("type")), str(cond.get("message") or cond.get("reason") or "")
    return str(status.get("state") or "DeploymentPending"), ""


def served_model_of(obj: dict[str, Any]) -> str | None:
    """The model name clients send to a managed endpoint: the worker's --served-model-name, else its --model
    (an InferenceEndpointConfig); None for a JumpStartModel (its container serves one model)."""
    if obj.get("kind") != KIND:
        return None
    args = [str(a) for a in ((obj.get("spec") or {}).get("worker") or {}).get("args") or []]
    return inference_manifests.flag(args, "--served-model-name") or inference_manifests.flag(
        args, "--model", "--model-path"
    )


def endpoint_name_of(obj: dict[str, Any]) -> str | None:
    """The SageMaker endpoint a managed endpoint asks the operator to register (None: none)."""
    spec = obj.get("spec") or {}
    name = spec.get("endpointName") if obj.get("kind") == KIND else (spec.get("sageMakerEndpoint") or {}).get("name")
    return str(name) if name else None


def jumpstart_model(name: str, namespace: str, model_id: str, instance_type: str, *, model_version: str | None,
                    endpoint_name: str | None, accept_eula: bool, replicas: int) -> dict[str, Any]:
    """The operator's JumpStartModel (CRD jumpstartmodels.inference.sagemaker.aws.amazon.com: spec.model,
    spec.server, spec.sageMakerEndpoint, spec.replicas), labelled as made by this control plane."""
    model: dict[str, Any] = {"modelHubName": "SageMakerPublicHub", "modelId": model_id, "acceptEula": accept_eula}
    if model_version:
        model["modelVersion"] = model_version
    spec: dict[str, Any] = {"model": model, "server": {"instanceType": instance_type}, "replicas": replicas}
    if endpoint_name:
        spec["sageMakerEndpoint"] = {"name": endpoint_name}
    labels = {inference_manifests.LABEL_MANAGED: inference_manifests.MANAGED_BY, inference_manifests.LABEL_APP: name}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": JUMPSTART_KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}
