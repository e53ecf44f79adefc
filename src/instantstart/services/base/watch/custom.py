"""Watch-fed custom resources: training jobs (HyperPodPyTorchJob, RayJob), Ray clusters and managed endpoints
(InferenceEndpointConfig, JumpStartModel), through the same informers as nodes and pods.

Each kind is watched cluster-wide once its CRD exists (an operator add-on that is off is no error: the informer
reports "absent" and checks again with backoff). Objects are kept as pruned copies in their own shape, holding
only the fields the list and status tools read, so the tools build their answers from a watched object or a
directly read one with the same code. The tools read them by the status tools' rule (base/watch/watched.py:
`from_watches`): stale with its age while a watch is down, a direct read only when the watches have not synced.
"""

from __future__ import annotations

from typing import Any

from instantstart.manifests import inference_endpoint as iec
from instantstart.manifests import ray_job as ray_m
from instantstart.manifests import training as train_m
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL, LABEL_MANAGED
from instantstart.services.base.watch.state import register_kinds

Obj = dict[str, Any]
_KEPT_LABELS = (train_m.LABEL_RECIPE, LABEL_MANAGED, train_m.QUEUE_LABEL, train_m.PRIORITY_LABEL)
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")


def _meta(md: Obj) -> Obj:
    labels = {k: v for k, v in (md.get("labels") or {}).items() if k in _KEPT_LABELS}
    return {"name": md.get("name", ""), "namespace": md.get("namespace", ""),
            "creationTimestamp": md.get("creationTimestamp"), "labels": labels}


def _conditions(status: Obj) -> list[Obj]:
    return [{k: c[k] for k in _CONDITION_KEYS if k in c} for c in status.get("conditions") or []]


def _some(source: Obj, *keys: str) -> Obj:
    return {k: source[k] for k in keys if k in source}


def pytorchjob_view(obj: Obj) -> Obj:
    """A HyperPodPyTorchJob pruned to what training_job_list and job_get_status read."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    specs = spec.get("replicaSpecs") or []
    replicas: list[Obj] = [_some(s, "replicas") for s in specs]
    if specs:
        tmpl = (specs[0].get("template") or {}).get("spec") or {}
        container = (tmpl.get("containers") or [{}])[0]
        selector = _some(tmpl.get("nodeSelector") or {}, INSTANCE_TYPE_LABEL)
        replicas[0]["template"] = {"spec": {"nodeSelector": selector,
                                            "containers": [_some(container, "image", "command")]}}
    return {
        "kind": train_m.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"replicaSpecs": replicas, "runPolicy": spec.get("runPolicy") or {}},
        "status": {"conditions": _conditions(status), "restartCount": status.get("restartCount"),
                   "restartStatus": _some(status.get("restartStatus") or {}, "fullJobRestartCount")},
    }


def rayjob_view(obj: Obj) -> Obj:
    """A RayJob pruned to what training_job_list and job_get_status read."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    cluster = spec.get("rayClusterSpec") or {}
    head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    groups = cluster.get("workerGroupSpecs") or []
    workers: list[Obj] = [_some(g, "groupName", "replicas") for g in groups]
    if groups:
        tmpl = (groups[0].get("template") or {}).get("spec") or {}
        workers[0]["template"] = {"spec": {"nodeSelector": _some(tmpl.get("nodeSelector") or {},
                                                                 INSTANCE_TYPE_LABEL)}}
    kept = _some(spec, "entrypoint", "backoffLimit", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished",
                 "activeDeadlineSeconds")
    head_container = _some((head.get("containers") or [{}])[0], "image")
    return {
        "kind": ray_m.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {**kept, "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [head_container]}}},
                                            "workerGroupSpecs": workers}},
        "status": _some(status, "jobDeploymentStatus", "jobStatus", "message", "reason", "failed", "rayClusterName"),
    }


def raycluster_view(obj: Obj) -> Obj:
    """A RayCluster: its worker groups and how many workers are ready."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "RayCluster",
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"workerGroupSpecs": [_some(g, "groupName", "replicas", "minReplicas", "maxReplicas")
                                      for g in spec.get("workerGroupSpecs") or []]},
        "status": _some(status, "state", "readyWorkerReplicas", "availableWorkerReplicas", "desiredWorkerReplicas"),
    }


def _endpoint_status(status: Obj) -> Obj:
    sagemaker = ((status.get("endpoints") or {}).get("sagemaker") or {})
    return {"conditions": _conditions(status), **_some(status, "state"),
            "endpoints": {"sagemaker": _some(sagemaker, "state", "name")}}


def endpoint_config_view(obj: Obj) -> Obj:
    """An InferenceEndpointConfig pruned to what inference_managed_list reads."""
    spec = obj.get("spec") or {}
    routing = _some(spec.get("intelligentRoutingSpec") or {}, "routingStrategy")
    return {
        "kind": iec.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {**_some(spec, "modelName", "instanceType", "replicas", "kvCacheSpec", "endpointName"),
                 "intelligentRoutingSpec": routing},
        "status": _endpoint_status(obj.get("status") or {}),
    }


def jumpstart_view(obj: Obj) -> Obj:
    """A JumpStartModel pruned to what inference_managed_list reads."""
    spec = obj.get("spec") or {}
    return {
        "kind": iec.JUMPSTART_KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"model": _some(spec.get("model") or {}, "modelId"),
                 "server": _some(spec.get("server") or {}, "instanceType"),
                 **_some(spec, "replicas", "sageMakerEndpoint")},
        "status": _endpoint_status(obj.get("status") or {}),
    }


CUSTOM_KINDS = {
    "hyperpodpytorchjobs": (f"/apis/{train_m.GROUP}/{train_m.VERSION}/{train_m.PLURAL}", pytorchjob_view),
    "rayjobs": (f"/apis/{ray_m.GROUP}/{ray_m.VERSION}/{ray_m.PLURAL}", rayjob_view),
    "rayclusters": (f"/apis/{ray_m.GROUP}/{ray_m.VERSION}/rayclusters", raycluster_view),
    "inferenceendpointconfigs": (f"/apis/{iec.GROUP}/{iec.VERSION}/{iec.PLURAL}", endpoint_config_view),
    "jumpstartmodels": (f"/apis/{iec.GROUP}/{iec.VERSION}/{iec.JUMPSTART_PLURAL}", jumpstart_view),
}
TRAINING_KINDS = ("hyperpodpytorchjobs", "rayjobs")
ENDPOINT_KINDS = ("inferenceendpointconfigs", "jumpstartmodels")


def register() -> None:
    """Register the custom resource kinds with the watch-fed state (live: the WebSocket pushes their changes).
    Called by services.load_all at start-up, so the import order of modules cannot change what is watched."""
    register_kinds(CUSTOM_KINDS, live=True)
