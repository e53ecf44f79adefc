"""The HyperPod inference operator: InferenceEndpointConfig → worker Deployment + Service, and its status."""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import TYPE_CHECKING

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.kinds import DEPLOYMENTS, SERVICES, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

IECS: TypeKey = ("inference.sagemaker.aws.amazon.com", "inferenceendpointconfigs")
APP_LABEL = "app"
ENDPOINT_LABEL = "inference.sagemaker.aws.amazon.com/endpoint-config"


def _model_volume(spec: Obj) -> tuple[Obj | None, Obj]:
    """The model volume (by modelSourceType) and its mount in the worker."""
    worker = spec.get("worker") or {}
    mount = worker.get("modelVolumeMount") or {}
    mount_obj = {"name": mount.get("name", "model-weights"), "mountPath": mount.get("mountPath", "/opt/ml/model")}
    source = spec.get("modelSourceConfig") or {}
    kind = source.get("modelSourceType", "")
    if kind == "kubernetesVolume" or not kind:
        return None, mount_obj
    return {"name": mount_obj["name"], "emptyDir": {}}, mount_obj


class InferenceOperator(OwnerController):
    """Renders each InferenceEndpointConfig as a Deployment `<name>` (worker container from
    spec.worker, replicas, instanceType node selection) and a ClusterIP Service `<name>` on the
    invocation port; status follows the Deployment (DeploymentInProgress → DeploymentComplete)."""

    primary = IECS
    owns = {DEPLOYMENTS: "InferenceEndpointConfig"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        iec = self.sim.get(IECS, ns, name)
        if iec is None or iec["metadata"].get("deletionTimestamp"):
            return
        spec = iec.get("spec") or {}
        worker = spec.get("worker") or {}
        port = int((worker.get("modelInvocationPort") or {}).get("containerPort", 8080))
        port_name = (worker.get("modelInvocationPort") or {}).get("name", "http")
        replicas = int(spec.get("replicas", spec.get("InitialReplicaCount", 1)) or 1)
        volume, mount = _model_volume(spec)
        container: Obj = {
            "name": "worker",
            "image": worker.get("image", ""),
            "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}],
            "resources": copy.deepcopy(worker.get("resources") or {}),
            "env": copy.deepcopy(worker.get("environmentVariables") or []),
            "volumeMounts": [mount],
        }
        for field_name in ("args", "command", "workingDir"):
            if worker.get(field_name):
                container[field_name] = copy.deepcopy(worker[field_name])
        instance_types = spec.get("instanceTypes") or ([spec["instanceType"]] if spec.get("instanceType") else [])
        current = serve(self.sim, iec, container, replicas, instance_types, volume, spec.get("nodeAffinity"))
        endpoint_status(self.sim, IECS, iec, current, replicas, spec.get("endpointName"))


def endpoint_status(
sim: ClusterSim, key: TypeKey, iec: Obj, deployment: Obj | None, replicas: int, endpoint: str | None
) -> None:
    """An operator's status for a model endpoint: state and conditions from its Deployment, and the SageMaker
    endpoint it registers (`endpoint`, when named) with its ARNs."""
    ns, name = iec["metadata"]["namespace"], iec["metadata"]["name"]
    now = sim.now()
    status = copy.deepcopy(iec.get("status") or {})
    dep_status = (deployment or {}).get("status") or {}
    available = int(dep_status.get("availableReplicas", 0))
    complete = deployment is not None and available >= replicas
    state = "DeploymentComplete" if complete else "DeploymentInProgress"
    status.update(
        {
            "state": state,
            "replicas": available,
            "selector": f"{APP_LABEL}={name}",
            "observedGeneration": iec["metadata"].get("generation", 1),
            "deploymentStatus": {
                "name": name,
                "lastUpdated": now,
                "deploymentObjectOverallState": state,
                "status": copy.deepcopy(dep_status),
            },
            "endpoints": {"sagemaker": _registration(sim, endpoint, complete)} if endpoint else {},
        }
    )
    if not status["endpoints"]:
        status.pop("endpoints")
    kobj.set_condition(
        status,
        "DeploymentComplete" if complete else "DeploymentInProgress",
        "True",
        now,
        state,
        f"{available}/{replicas} replicas available",
    )
    kobj.set_condition(status, "DeploymentInProgress" if complete else "DeploymentComplete", "False", now, state)
    sim.patch_status(key, iec, status, volatile=("lastUpdated",))
    if complete and (iec.get("status") or {}).get("state") != "DeploymentComplete":
        sim.event(
            iec,
            "DeploymentComplete",
            f"Model {name} is serving on {ns}/{name}",
            source="hyperpod-inference-operator",
        )


def _registration(sim: ClusterSim, endpoint: str, complete: bool) -> Obj:
    """status.endpoints.sagemaker: the endpoint the operator registers once the workers are available."""
    _, _, _, region, account, _ = (sim.runtime.arn.split(":", 5) + [""] * 6)[:6]
    prefix = f"arn:aws:sagemaker:{region}:{account}"
    return {"state": "CreationCompleted" if complete else "CreationInProgress",
            "endpointArn": f"{prefix}:endpoint/{endpoint.lower()}",
            "configArn": f"{prefix}:endpoint-config/{endpoint.lower()}",
            "modelArn": f"{prefix}:model/{endpoint.lower()}"}


def serve(
    sim: ClusterSim,
    owner: Obj,
    container: Obj,
    replicas: int,
    instance_types: list[str],
    volume: Obj | None = None,
    node_affinity: Obj | None = None,
) -> Obj | None:
    """The Deployment `<name>` and ClusterIP Service `<name>` (on the container's first port) an operator
    renders for a model endpoint, both owned by it; returns the live Deployment."""
    ns, name = owner["metadata"]["namespace"], owner["metadata"]["name"]
    labels = {APP_LABEL: name, ENDPOINT_LABEL: name}
    port = container["ports"][0]
    pod_spec: Obj = kobj.normalize_pod_spec({"containers": [container]})
    if volume is not None:
        pod_spec["volumes"] = [volume]
    if instance_types:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "In",
                                    "values": instance_types,
                                }
                            ]
                        }
                    ]
                }
            }
        }
    elif node_affinity:
        pod_spec["affinity"] = {"nodeAffinity": copy.deepcopy(node_affinity)}
    deployment: Obj = {
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": dict(labels),
            "ownerReferences": [kobj.owner_ref(owner)],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }
    current = sim.get(DEPLOYMENTS, ns, name)
    if current is None:
        current = sim.create(DEPLOYMENTS, deployment)
    elif (
        current["spec"].get("template") != deployment["spec"]["template"]
        or current["spec"].get("replicas") != replicas
    ):
        current["spec"].update(deployment["spec"])
        current["metadata"].pop("resourceVersion", None)
        current = sim.update(DEPLOYMENTS, current)
    service = {
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": dict(labels),
            "ownerReferences": [kobj.owner_ref(owner)],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": dict(labels),
            "ports": [{"name": port["name"], "port": port["containerPort"], "targetPort": port["containerPort"],
                       "protocol": "TCP"}],
        },
    }
    if sim.get(SERVICES, ns, name) is None:
        sim.create(SERVICES, service)
    return current
