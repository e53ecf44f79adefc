"""Defaulting and admission of new objects, as kube-apiserver's registry strategies do it."""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterator
from typing import Any

from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store import ResourceType

Obj = dict[str, Any]


def apply_defaults(rtype: ResourceType, obj: Obj, ips: Iterator[int]) -> None:
    """What admission and defaulting add to a new object (`ips` hands out Service cluster IPs)."""
    if rtype.key == ("", "secrets"):
        fold_string_data(obj)
        obj.setdefault("type", "Opaque")
    elif rtype.key == ("", "namespaces"):
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif rtype.key == ("", "services"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if not spec.get("clusterIP"):  # "" asks for one too; "None" is headless
            ip = str(ipaddress.ip_address("10.100.0.0") + next(ips))
            spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj.setdefault("status", {"loadBalancer": {}})
    elif rtype.key == ("", "pods"):
        spec = obj.setdefault("spec", {})
        _default_pod_spec(spec, "Always")
        spec.setdefault("serviceAccountName", "default")
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    elif rtype.key in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
                       ("apps", "daemonsets")):
        spec = obj.setdefault("spec", {})
        if rtype.plural != "daemonsets":
            spec.setdefault("replicas", 1)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}), "Always")
        if rtype.plural == "deployments":
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            if not (spec.get("strategy") or {}).get("type"):
                spec["strategy"] = {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    elif rtype.key == ("batch", "jobs"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}), "OnFailure")
    elif rtype.key == ("batch", "cronjobs"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        job = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
        _default_pod_spec(job.setdefault("template", {}).setdefault("spec", {}), "OnFailure")
    elif rtype.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        spec = obj.get("spec") or {}
        expected = f"{(spec.get('names') or {}).get('plural', '')}.{spec.get('group', '')}"
        if obj["metadata"].get("name") != expected:
            raise ApiError(
                422,
                f'CustomResourceDefinition.apiextensions.k8s.io "{obj["metadata"].get("name")}" is invalid: '
                f'metadata.name: Invalid value: must be spec.names.plural+"."+spec.group ({expected})',
                "Invalid",
            )


def fold_string_data(obj: Obj) -> None:
    """Secrets: stringData is write-only and merges into data."""
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {}) or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _default_pod_spec(spec: Obj, restart_policy: str) -> None:
    """The defaults kube-apiserver fills into a pod spec (and pod templates)."""
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1].partition(":")[2] if "@" not in image else "digest"
        container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")


def _qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    requests = [c.get("resources", {}).get("requests") or {} for c in containers]
    limits = [c.get("resources", {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    if all(lim.get("cpu") and lim.get("memory") and (not req or req == lim) for req, lim in zip(requests, limits,
                                                                                           strict=False)):
        return "Guaranteed"
    return "Burstable"
