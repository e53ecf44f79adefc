"""What the watches keep of each Kubernetes object: only the fields the status, node list and Monitoring views read."""

from __future__ import annotations

from typing import Any

from instantstart.manifests import inference as inf
from instantstart.manifests import ray_job as ray_m
from instantstart.manifests import training as train_m
from instantstart.manifests.labels import LABEL_MANAGED, MANAGER
from instantstart.manifests.storage import DEFAULT_NAMESPACE
from instantstart.services.base.status_reads import GPU, NEURON, node_summary, pod_request

Obj = dict[str, Any]
# The labels that tie a pod to its training job (the operator's job label, a Ray cluster's, a Ray submitter's):
# the only labels a pod's projection keeps, and what state.PodLabels indexes.
JOB_POD_LABELS = (train_m.POD_JOB_LABEL, ray_m.CLUSTER_LABEL, ray_m.SUBMITTER_LABEL)
_SERVER_LABELS = (inf.LABEL_MANAGED, inf.LABEL_ENGINE, inf.LABEL_COMPONENT)  # a router: component=router
_SERVER_ANNOTATIONS = (inf.ANNOTATION_MODEL, inf.ANNOTATION_PORT, inf.ANNOTATION_GPUS)


def _kept(source: Obj | None, keys: tuple[str, ...]) -> dict[str, str]:
    return {k: str(v) for k, v in (source or {}).items() if k in keys}


def node_view(node: Obj) -> Obj:
    """A Node as the status summarises it (see status_reads.node_summary)."""
    return node_summary(node)


def pod_view(pod: Obj) -> Obj:
    """A Pod: where it runs, its phase and readiness, accelerators requested, its owner, when it ran."""
    md, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    owners = md.get("ownerReferences") or []
    return {
        "namespace": md.get("namespace", ""),
        "name": md.get("name", ""),
        "node": spec.get("nodeName"),
        "phase": status.get("phase", "Pending"),
        "ready": bool(containers) and all(c.get("ready") for c in containers),
        "restarts": sum(int(c.get("restartCount") or 0) for c in containers),
        "gpu": pod_request(spec, GPU),
        "neuron": pod_request(spec, NEURON),
        "owner": f"{owners[0].get('kind')}/{owners[0].get('name')}" if owners else None,
        "created": md.get("creationTimestamp"),
        "labels": _kept(md.get("labels"), JOB_POD_LABELS),
        # When it held its node's accelerators (usage_report): started, containers finished, deletion deadline.
        "uid": md.get("uid", ""),
        "started": status.get("startTime"),
        "finished": max((t for t in (((c.get("state") or {}).get("terminated") or {}).get("finishedAt")
                                     for c in containers) if t), default=None),
        "deleting": md.get("deletionTimestamp"),
    }


def claim_view(claim: Obj) -> Obj:
    """A PersistentVolumeClaim with its phase and volume."""
    md, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    phase = (claim.get("status") or {}).get("phase", "Pending")
    return {
        "namespace": md.get("namespace", DEFAULT_NAMESPACE),
        "name": md.get("name", ""),
        "phase": phase,
        "bound": phase == "Bound",
        "volumeName": spec.get("volumeName") or None,
        "storageClassName": spec.get("storageClassName"),
        "managed": (md.get("labels") or {}).get(LABEL_MANAGED) == MANAGER,
    }


def service_view(service: Obj) -> Obj:
    """A Service: type, cluster IP, ports, external address."""
    md, spec = service.get("metadata") or {}, service.get("spec") or {}
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return {
        "namespace": md.get("namespace", ""),
        "name": md.get("name", ""),
        "type": spec.get("type", "ClusterIP"),
        "clusterIP": spec.get("clusterIP"),
        "ports": [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []],
        "external": (ingress[0].get("hostname") or ingress[0].get("ip")) if ingress else None,
        "port": (spec.get("ports") or [{}])[0].get("port"),
        "managed": inf.LABEL_MANAGED in (md.get("labels") or {}),
        "loadBalancer": inf.load_balancer_scheme(spec.get("type"), md.get("annotations")),
        "sourceRanges": list(spec.get("loadBalancerSourceRanges") or []),
    }


def deployment_view(deployment: Obj) -> Obj:
    """A Deployment: desired and ready replicas."""
    md, spec, status = deployment.get("metadata") or {}, deployment.get("spec") or {}, deployment.get("status") or {}
    return {
        "namespace": md.get("namespace", ""),
        "name": md.get("name", ""),
        "replicas": int(spec["replicas"]) if spec.get("replicas") is not None else 1,
        "ready": int(status.get("readyReplicas") or 0),
        "available": int(status.get("availableReplicas") or 0),
        "desired": int(spec.get("replicas") or 0),
        "labels": _kept(md.get("labels"), _SERVER_LABELS),
        "annotations": _kept(md.get("annotations"), _SERVER_ANNOTATIONS),
    }


def event_view(event: Obj) -> Obj:
    """A core/v1 Event: what it is about, why, how often, when."""
    md = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    return {
        "namespace": md.get("namespace", ""),
        "name": md.get("name", ""),
        "uid": md.get("uid") or f"{md.get('namespace', '')}/{md.get('name', '')}",
        "type": event.get("type") or "Normal",
        "reason": event.get("reason") or "",
        "message": (event.get("message") or "")[:1000],
        "objectKind": involved.get("kind") or "",
        "objectName": involved.get("name") or "",
        "objectNamespace": involved.get("namespace") or "",
        "count": int(event.get("count") or 1),
        "first": event.get("firstTimestamp") or event.get("eventTime") or md.get("creationTimestamp"),
        "last": event.get("lastTimestamp") or event.get("eventTime") or md.get("creationTimestamp"),
        "source": source.get("component") or event.get("reportingComponent") or "",
    }
