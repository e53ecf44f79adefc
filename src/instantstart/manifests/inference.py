"""Self-managed model servers: engine recognition from a command line, and the Deployment/Service/Secret objects."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from instantstart.manifests import fsx

# LABEL_MANAGED and LABEL_APP re-exported: the inference modules read m.LABEL_MANAGED and m.LABEL_APP.
from instantstart.manifests.labels import HEALTH_LABEL, INSTANCE_TYPE_LABEL, MANAGER
from instantstart.manifests.labels import LABEL_APP as LABEL_APP
from instantstart.manifests.labels import LABEL_MANAGED as LABEL_MANAGED
from instantstart.manifests.resources import PodResources

MANAGED_BY = MANAGER  # the managed-by value, as inference modules read it (m.MANAGED_BY)
LABEL_ENGINE = "instantstart.io/engine"
LABEL_COMPONENT = "instantstart.io/component"
LABEL_BUSINESS = "business"
ANNOTATION_MODEL = "instantstart.io/served-model"
ANNOTATION_PORT = "instantstart.io/port"
ANNOTATION_GPUS = "instantstart.io/gpu-count"
GPU = "nvidia.com/gpu"
UNASSIGNED = "unassigned"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
BOUND_DELETION_COST = "1000"
POOL_SERVICE = "pool-service"
TOKEN_KEY = "token"
S3_MOUNT = "/s3"
API_KEY_KEY = "api-key"
API_KEY_ENV = "MODEL_SERVER_API_KEY"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_INTERNAL_LEGACY = "service.beta.kubernetes.io/aws-load-balancer-internal"


EngineName = Literal["vllm", "sglang", "other"]


@dataclass(frozen=True)
class Engine:
    """A serving engine: how it is recognised, its default image, port and health path."""

    name: EngineName
    image: str
    port: int
    health_path: str


ENGINES = {
    "vllm": Engine("vllm", "vllm/vllm-openai:v0.11.0", 8000, "/health"),
    "sglang": Engine("sglang", "lmsysorg/sglang:v0.5.3-cu126", 30000, "/health"),
    "other": Engine("other", "", 8000, "/health"),
}


class CommandError(ValueError):
    """The deployment command cannot be read (unbalanced quotes, empty, shell syntax)."""


_OPERATORS = set("|&;<>()")


def tokens(command: str) -> list[str]:
    """The command as an argument list (never run through a shell): quotes are honoured; shell operators and
    substitutions outside quotes are refused, since nothing would interpret them."""
    try:
        words = shlex.split(command)
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        pieces = list(lexer)
    except ValueError as exc:
        raise CommandError(f"cannot parse the command: {exc}") from None
    if not words:
        raise CommandError("the command is empty")
    if any(piece and set(piece) <= _OPERATORS for piece in pieces) or "`" in command or "$(" in command:
        raise CommandError("shell operators (| ; & > < ` $( ) are not supported: give one command line")
    return words


def engine_of(words: list[str], image: str | None = None) -> Engine:
    """vLLM (`vllm serve …`, `python -m vllm.entrypoints…`), SGLang (`python -m sglang.launch_server …`), or other."""
    text = " ".join(words).lower()
    if words[0].endswith("vllm") or "vllm.entrypoints" in text or (image or "").lower().find("vllm") >= 0:
        return ENGINES["vllm"]
    if "sglang.launch_server" in text or "sglang" in words[0].lower() or "sglang" in (image or "").lower():
        return ENGINES["sglang"]
    return ENGINES["other"]


def flag(words: list[str], *names: str) -> str | None:
    """The value of the first of `names` given as `--name value` or `--name=value`."""
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def _int_flag(words: list[str], *names: str) -> int:
    value = flag(words, *names)
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise CommandError(f"{names[0]} must be a positive whole number, got {value!r}")
    return int(value)


def parallelism(words: list[str]) -> tuple[int, int]:
    """(tensor parallel, pipeline parallel) sizes the command asks for (1 when absent)."""
    tp = _int_flag(words, "--tensor-parallel-size", "--tp-size", "--tp", "-tp")
    pp = _int_flag(words, "--pipeline-parallel-size", "--pp-size", "--pp", "-pp")
    return tp, pp


def served_model(words: list[str]) -> str | None:
    """The model name clients must send: --served-model-name, else --model/--model-path, else `vllm serve X`."""
    named = flag(words, "--served-model-name")
    if named:
        return named
    model = flag(words, "--model", "--model-path")
    if model:
        return model
    if "serve" in words:
        i = words.index("serve")
        if i + 1 < len(words) and not words[i + 1].startswith("-"):
            return words[i + 1]
    return None


def listening_port(words: list[str], engine: Engine, port: int | None) -> int:
    """The port the server listens on: the command's --port wins, else the caller's, else the engine default."""
    given = flag(words, "--port")
    if given is not None:
        if not given.isdigit() or not 0 < int(given) < 65536:
            raise CommandError(f"--port must be a TCP port, got {given!r}")
        return int(given)
    return port or engine.port


def with_port(words: list[str], engine: Engine, port: int) -> list[str]:
    """The command with an explicit --port (and --host 0.0.0.0 for engines that default to loopback)."""
    out = list(words)
    if engine.name in ("vllm", "sglang") and flag(out, "--port") is None:
        out += ["--port", str(port)]
    if engine.name == "sglang" and flag(out, "--host") is None:
        out += ["--host", "0.0.0.0"]
    return out


def default_name(engine: Engine, now: datetime) -> str:
    """`<engine>-model-<YYMMDD-HHMMSS>`."""
    return f"{engine.name}-model-{now:%y%m%d-%H%M%S}"


def service_name(name: str) -> str:
    """The Service in front of a deployment."""
    return f"{name}-service"


def token_secret_name(name: str) -> str:
    """The Secret that holds a deployment's Hugging Face token."""
    return f"{name}-hf-token"


def api_key_secret_name(name: str) -> str:
    """The Secret that holds the API key a deployment's server demands (`--api-key`)."""
    return f"{name}-api-key"


class ServerSpec(BaseModel):
    """Everything a self-managed model server's objects are built from (the deploy operation's params extend it,
    so a new field is declared here once)."""

    model_config = ConfigDict(frozen=True)

    name: str
    namespace: str
    engine: EngineName
    command: list[str]
    image: str
    gpu_count: int
    replicas: int
    instance_types: list[str]
    port: int
    service_type: str
    model: str | None
    token_secret: str | None
    s3_claim: str | None
    fsx_claim: str | None = None  # an FSx for Lustre claim mounted read-only at /fsx (models served from it)
    load_balancer_scheme: Literal["internal", "internet-facing"] = "internal"
    source_ranges: list[str] = []
    api_key_secret: str | None = None
    # cpu/memory per replica, sized from the instance-type catalog (0: not requested, as before sizing existed).
    cpu_milli: int = 0
    memory_mib: int = 0

    @property
    def engine_spec(self) -> Engine:
        """The engine's defaults (image, port, health path)."""
        return ENGINES[self.engine]


def _labels(spec: ServerSpec) -> dict[str, str]:
    labels = {LABEL_APP: spec.name, LABEL_MANAGED: MANAGED_BY, LABEL_ENGINE: spec.engine}
    if spec.service_type == "modelpool":
        labels[LABEL_BUSINESS] = UNASSIGNED
    return labels


def _annotations(spec: ServerSpec) -> dict[str, str]:
    notes = {ANNOTATION_PORT: str(spec.port), ANNOTATION_GPUS: str(spec.gpu_count)}
    if spec.model:
        notes[ANNOTATION_MODEL] = spec.model
    return notes


def _container(spec: ServerSpec) -> dict[str, Any]:
    env: list[dict[str, Any]] = []
    if spec.token_secret:
        ref = {"secretKeyRef": {"name": spec.token_secret, "key": TOKEN_KEY}}
        env += [{"name": "HF_TOKEN", "valueFrom": ref}, {"name": "HUGGING_FACE_HUB_TOKEN", "valueFrom": ref}]
    command = list(spec.command)
    if spec.api_key_secret:
        # The key reaches the server by a Secret reference only: the pod spec holds `$(MODEL_SERVER_API_KEY)`,
        # which the kubelet expands from the env var when it starts the container.
        env.append({"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret,
                                                                        "key": API_KEY_KEY}}})
        command += ["--api-key", f"$({API_KEY_ENV})"]
    probe = {"httpGet": {"path": spec.engine_spec.health_path, "port": spec.port}, "periodSeconds": 10}
    container: dict[str, Any] = {
        "name": "server",
        "image": spec.image,
        "command": command,
        "ports": [{"name": "http", "containerPort": spec.port}],
        "env": env,
        "resources": PodResources(gpus=spec.gpu_count, cpu_milli=spec.cpu_milli,
                                  memory_mib=spec.memory_mib).render(),
        "readinessProbe": {**probe, "failureThreshold": 3},
        "startupProbe": {**probe, "failureThreshold": 180},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],  # noqa: S108 (a memory volume for NCCL)
    }
    if spec.s3_claim:
        container["volumeMounts"].append({"name": "s3", "mountPath": S3_MOUNT, "readOnly": True})
    if spec.fsx_claim:
        container["volumeMounts"].append(fsx.claim_mount(read_only=True))
    return container


def deployment(spec: ServerSpec) -> dict[str, Any]:
    """The Deployment: GPUs requested and limited, pinned to the GPU instance types on healthy nodes."""
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    if spec.s3_claim:
        volumes.append({"name": "s3", "persistentVolumeClaim": {"claimName": spec.s3_claim, "readOnly": True}})
    if spec.fsx_claim:
        volumes.append(fsx.claim_volume(spec.fsx_claim, read_only=True))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": spec.instance_types},
                            {"key": HEALTH_LABEL, "operator": "NotIn",
                             "values": ["UnschedulablePendingReplacement", "UnschedulablePendingReboot"]},
                        ]
                    }
                ]
            }
        }
    }
    labels = _labels(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels,
                     "annotations": _annotations(spec)},
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": {LABEL_APP: spec.name}},
            "template": {
                "metadata": {"labels": labels, "annotations": _annotations(spec)},
                "spec": {
                    "containers": [_container(spec)],
                    "volumes": volumes,
                    "affinity": affinity,
                    "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
        },
    }


def service(spec: ServerSpec, *, load_balancer_controller: bool) -> dict[str, Any]:
    """The Service: ClusterIP (clusterip, modelpool) or LoadBalancer (external: an NLB through the AWS Load Balancer
    Controller when it is installed, else the in-tree controller's). An external Service is internal unless the
    spec says internet-facing, and only its source ranges may reach it (`spec.loadBalancerSourceRanges`, which
    both controllers turn into security group rules). A model pool's Service selects only workers assigned to it."""
    selector = {LABEL_APP: spec.name}
    if spec.service_type == "modelpool":
        selector = {LABEL_BUSINESS: spec.name}
    metadata: dict[str, Any] = {"name": service_name(spec.name), "namespace": spec.namespace,
                                "labels": {LABEL_APP: spec.name, LABEL_MANAGED: MANAGED_BY},
                                "annotations": _annotations(spec)}
    body: dict[str, Any] = {"type": "ClusterIP", "selector": selector,
                            "ports": [{"name": "http", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}]}
    if spec.service_type == "external":
        body.update(type="LoadBalancer", loadBalancerSourceRanges=list(spec.source_ranges))
        if load_balancer_controller:
            metadata["annotations"].update({
                "service.beta.kubernetes.io/aws-load-balancer-type": "external",
                "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
                LB_SCHEME: spec.load_balancer_scheme,
            })
        elif spec.load_balancer_scheme == "internal":
            metadata["annotations"][LB_INTERNAL_LEGACY] = "true"  # the in-tree controller is internet-facing else
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": body}


def load_balancer_scheme(service_type: str | None, annotations: dict[str, str] | None) -> str | None:
    """What a LoadBalancer Service's annotations say about its scheme: internal or internet-facing (None: not a
    LoadBalancer, or no annotation, so the controller's default applies)."""
    notes = annotations or {}
    if service_type != "LoadBalancer":
        return None
    if notes.get(LB_SCHEME) in ("internal", "internet-facing"):
        return notes[LB_SCHEME]
    return "internal" if notes.get(LB_INTERNAL_LEGACY) == "true" else None


def exposure(spec: ServerSpec) -> dict[str, Any]:
    """Who can reach the server, as the deploy answer states it: in-cluster only, or an internal or
    internet-facing load balancer with its source ranges and the Secret holding its API key."""
    if spec.service_type != "external":
        return {"reach": "cluster", "loadBalancer": None, "sourceRanges": [], "apiKeySecret": spec.api_key_secret}
    return {"reach": "public" if spec.load_balancer_scheme == "internet-facing" else "internal",
            "loadBalancer": spec.load_balancer_scheme, "sourceRanges": list(spec.source_ranges),
            "apiKeySecret": spec.api_key_secret}


def _secret(secret: str, name: str, namespace: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "namespace": namespace, "labels": {LABEL_APP: name, LABEL_MANAGED: MANAGED_BY}},
        "type": "Opaque",
        "stringData": {key: value},
    }


def token_secret(name: str, namespace: str, token: str) -> dict[str, Any]:
    """The Secret holding a Hugging Face token (the only place it is ever written)."""
    return _secret(token_secret_name(name), name, namespace, TOKEN_KEY, token)


def api_key_secret(name: str, namespace: str, key: str) -> dict[str, Any]:
    """The Secret holding a server's API key (the only place it is ever written)."""
    return _secret(api_key_secret_name(name), name, namespace, API_KEY_KEY, key)


def pool_service(service: str, namespace: str, pool: str, port: int, notes: dict[str, str]) -> dict[str, Any]:
    """The Service of a service fed from a model pool: selects the workers labelled business=<service>."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name(service), "namespace": namespace,
                     "labels": {LABEL_APP: pool, LABEL_MANAGED: MANAGED_BY, LABEL_COMPONENT: POOL_SERVICE},
                     "annotations": {k: v for k, v in notes.items() if k.startswith("instantstart.io/")}},
        "spec": {"type": "ClusterIP", "selector": {LABEL_BUSINESS: service},
                 "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]},
    }
