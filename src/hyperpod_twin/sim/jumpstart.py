"""JumpStartModel (the inference operator's JumpStart path) and SageMaker runtime InvokeEndpoint on the
endpoints the operator registers, answered by the simulated model server behind them."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable

from hyperpod_twin.aws import instance_types
from hyperpod_twin.aws.protocol import AwsError, AwsRequest, RawResponse
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.inference import APP_LABEL, IECS, endpoint_status, serve
from hyperpod_twin.sim.kinds import DEPLOYMENTS, PODS, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

JUMPSTARTS: TypeKey = ("inference.sagemaker.aws.amazon.com", "jumpstartmodels")
# The twin's stand-in for the serving container a JumpStart model spec names (an LMI image on vLLM).
LMI_IMAGE = "763104351884.dkr.ecr.{region}.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
LMI_PORT = 8080


class JumpStartOperator(OwnerController):
    """Renders each JumpStartModel as a Deployment and Service `<name>` (an LMI container on port 8080, the model at
    /opt/ml/model, pinned to spec.server.instanceType) and registers spec.sageMakerEndpoint.name, when not empty,
    once the replicas are available; status as for an InferenceEndpointConfig. A JumpStartModel has no resources
    field: a replica takes every GPU of its instance type (SM_NUM_GPUS, as JumpStart's per-instance settings shard
    the model over the whole instance)."""

    primary = JUMPSTARTS
    owns = {DEPLOYMENTS: "JumpStartModel"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        model = self.sim.get(JUMPSTARTS, ns, name)
        if model is None or model["metadata"].get("deletionTimestamp"):
            return
        spec = model.get("spec") or {}
        region = self.sim.runtime.arn.split(":")[3] if self.sim.runtime.arn.count(":") >= 3 else "us-west-2"
        model_id = str((spec.get("model") or {}).get("modelId", ""))
        instance_type = (spec.get("server") or {}).get("instanceType")
        gpus = str(gpus_of(instance_type))
        env = [{"name": "HF_MODEL_ID", "value": "/opt/ml/model"}, {"name": "OPTION_ROLLING_BATCH", "value": "vllm"},
               {"name": "SM_NUM_GPUS", "value": gpus}, {"name": "JUMPSTART_MODEL_ID", "value": model_id},
               *(spec.get("environmentVariables") or [])]
        container: Obj = {
            "name": "jumpstart-model",
            "image": LMI_IMAGE.format(region=region),
            "ports": [{"name": "http", "containerPort": LMI_PORT, "protocol": "TCP"}],
            "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
            "env": env,
            "volumeMounts": [{"name": "model-weights", "mountPath": "/opt/ml/model"}],
        }
        replicas = int(spec.get("replicas", 1) or 1)
        current = serve(self.sim, model, container, replicas, [instance_type] if instance_type else [],
                        {"name": "model-weights", "emptyDir": {}})
        endpoint = (spec.get("sageMakerEndpoint") or {}).get("name")
        endpoint_status(self.sim, JUMPSTARTS, model, current, replicas, endpoint)


def gpus_of(instance_type: object) -> int:
    """The NVIDIA GPUs of an instance type (1 for a type the twin has no facts for)."""
    facts = instance_types.get(str(instance_type or ""))
    return facts.gpus if facts is not None and facts.gpus > 0 else 1


def _endpoint_of(obj: Obj, kind: TypeKey) -> str | None:
    spec = obj.get("spec") or {}
    name = spec.get("endpointName") if kind == IECS else (spec.get("sageMakerEndpoint") or {}).get("name")
    return str(name) if name else None


def invoke_endpoint(sims: Iterable[ClusterSim], req: AwsRequest, account: str) -> RawResponse:
    """InvokeEndpoint: the registered endpoint's model server answers the payload on its invocation path."""
    name = req.uri_params.get("EndpointName", "")
    for sim in sims:
        if sim.runtime.arn.split(":")[3:4] != [req.region]:
            continue
        for kind in (IECS, JUMPSTARTS):
            for obj in sim.list(kind):
                registered = ((obj.get("status") or {}).get("endpoints") or {}).get("sagemaker") or {}
                if _endpoint_of(obj, kind) != name or registered.get("state") != "CreationCompleted":
                    continue
                path = str((obj.get("spec") or {}).get("invocationEndpoint") or "invocations") if kind == IECS \
                    else "invocations"
                return _forward(sim, obj, path, req)
    raise AwsError("ValidationException", f"Endpoint {name} of account {account} not found.", 400)


def _forward(sim: ClusterSim, obj: Obj, path: str, req: AwsRequest) -> RawResponse:
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    for pod in sim.list(PODS, ns):
        if (pod["metadata"].get("labels") or {}).get(APP_LABEL) != name or not kobj.pod_is_ready(pod):
            continue
        for _port, handler in sim.runtime.pod_http.handlers_of(ns, pod["metadata"]["name"]):
            response = handler("POST", "/" + path.lstrip("/"), "", dict(req.headers), req.body)
            if response.status >= 400:
                text = response.body.decode(errors="replace")[:1000]
                raise AwsError("ModelError", f'Received client error ({response.status}) from primary with message '
                               f'"{text}". See the CloudWatch logs of the endpoint.', 424,
                               OriginalStatusCode=response.status, OriginalMessage=text)
            headers = {"Content-Type": response.headers.get("Content-Type", "application/json"),
                       "x-Amzn-Invoked-Production-Variant": "AllTraffic"}
            return RawResponse(200, response.body, headers)
    raise AwsError("ModelError", f"Received server error (503) from primary with message "
                   f"\"{json.dumps({'error': 'no ready worker'})}\".", 424, OriginalStatusCode=503)
