"""Helpers for the simulator's controllers: quantities, selectors, conditions, owner references, names."""

from __future__ import annotations

import copy
import hashlib
import math
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

# Annotations on pods (or their templates) that script what a simulated container does.
RUN_SECONDS = "twin.instantstart.io/run-seconds"  # how long a run-to-completion container runs
START_SECONDS = "twin.instantstart.io/start-seconds"  # image pull + start delay before Running
FAIL = "twin.instantstart.io/fail"  # "true": the container exits 1
GPU_IDLE = "twin.instantstart.io/gpu-idle"  # "true": the pod holds its GPUs but leaves them idle (DCGM ~1 %)
FAIL_ATTEMPTS = "twin.instantstart.io/fail-attempts"  # "<n>": attempts 0..n-1 exit 1, later ones succeed
LOG_LINES = "twin.instantstart.io/log-lines"  # newline-separated lines the container writes
ATTEMPT = "twin.instantstart.io/attempt"  # set by controllers: which retry of the workload a pod is
METRIC_VALUE = "twin.instantstart.io/metric-value"  # KEDA: the value the ScaledObject's trigger reads

_SUFFIXES = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity(value: Any) -> float:
    """A Kubernetes quantity ("500m", "16Gi", 4, "1e3") as a float in base units."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    number, suffix = match.groups()
    if suffix and suffix not in _SUFFIXES:
        raise ValueError(f"unknown quantity suffix in {value!r}")
    return float(number) * _SUFFIXES.get(suffix, 1)


def format_quantity(resource: str, value: float) -> str:
    """Render a base-unit amount the way the kubelet reports it (memory in Ki, cpu in cores or m)."""
    if resource == "memory" or resource.endswith("storage"):
        return f"{int(value // 1024)}Ki"
    if resource == "cpu" and not float(value).is_integer():
        return f"{round(value * 1000)}m"
    return str(int(value))


def pod_requests(pod: Obj) -> dict[str, float]:
    """Effective requests of a pod: sum over containers, max with each init container (as kube does).

    A container that sets only limits requests its limits (Kubernetes defaulting).
    """
    spec = pod.get("spec", {})
    total: dict[str, float] = {}
    for container in spec.get("containers", []) or []:
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0.0) + value
    for container in spec.get("initContainers", []) or []:
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0.0), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0.0) + quantity(value)
    return total


def _container_requests(container: Obj) -> dict[str, float]:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: quantity(value) for name, value in merged.items()}


# -- selectors --------------------------------------------------------------------------------------
def match_labels(selector: Obj | None, labels: dict[str, str] | None) -> bool:
    """A LabelSelector ({matchLabels, matchExpressions}) against labels; an empty selector matches all."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_match_expression(expr, labels) for expr in selector.get("matchExpressions") or [])


def match_map(selector: dict[str, str] | None, labels: dict[str, str] | None) -> bool:
    """A plain map selector (Service.spec.selector, nodeSelector); an empty map matches everything."""
    labels = labels or {}
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def _match_expression(expr: Obj, labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_term_matches(term: Obj, node: Obj) -> bool:
    """One NodeSelectorTerm (matchExpressions on labels, matchFields on metadata.name) against a node."""
    labels = node.get("metadata", {}).get("labels") or {}
    if not all(_match_expression(e, labels) for e in term.get("matchExpressions") or []):
        return False
    fields = {"metadata.name": node["metadata"]["name"]}
    return all(_match_expression(e, fields) for e in term.get("matchFields") or [])


# -- taints -----------------------------------------------------------------------------------------
def tolerates(tolerations: list[Obj] | None, taint: Obj) -> bool:
    """Whether any toleration tolerates the taint (key/operator/value/effect as kube matches them)."""
    for tol in tolerations or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        key = tol.get("key", "")
        op = tol.get("operator", "Equal")
        if not key and op == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


# -- metadata ---------------------------------------------------------------------------------------
def meta(obj: Obj) -> Obj:
    """obj.metadata (created when missing)."""
    result: Obj = obj.setdefault("metadata", {})
    return result


def owner_ref(owner: Obj, *, controller: bool = True) -> Obj:
    """An ownerReference to `owner` (blockOwnerDeletion so foreground deletion waits for dependents)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Obj) -> Obj | None:
    """The ownerReference with controller=true, if any."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_owned_by(obj: Obj, owner: Obj) -> bool:
    """Whether `owner` is the controller of `obj` (matched by uid)."""
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == owner["metadata"]["uid"]


def template_hash(template: Obj) -> str:
    """A short stable hash of a pod template (the pod-template-hash label of ReplicaSets)."""
    digest = hashlib.sha256(repr(_canonical(template)).encode()).hexdigest()
    return "".join(c for c in digest if c in "bcdfghjklmnpqrstvwxz2456789")[:10] or digest[:10]


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return value


def random_suffix(length: int = 5) -> str:
    """Random lowercase suffix like the generateName suffixes controllers use."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    raw = uuid.uuid4().int
    out = []
    for _ in range(length):
        raw, idx = divmod(raw, len(alphabet))
        out.append(alphabet[idx])
    return "".join(out)


def rfc3339(ts: float) -> str:
    """A Unix timestamp in Kubernetes' time format."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """Kubernetes time string to a Unix timestamp."""
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def set_condition(status: Obj, ctype: str, value: str, now: str, reason: str = "", message: str = "") -> bool:
    """Set a condition in status.conditions; lastTransitionTime moves only when status changes.

    Returns whether anything changed.
    """
    conditions: list[Obj] = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == ctype:
            changed = (cond.get("status"), cond.get("reason", ""), cond.get("message", "")) != (
                value,
                reason,
                message,
            )
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond.update({"status": value, "reason": reason, "message": message})
            return changed
    conditions.append({"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": now})
    return True


def condition(obj: Obj, ctype: str) -> Obj | None:
    """A condition of obj.status by type."""
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Obj, ctype: str) -> bool:
    """Whether obj's condition `ctype` is True."""
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def annotation(obj: Obj, key: str, default: str = "") -> str:
    """An annotation value (or `default`)."""
    return str((obj.get("metadata", {}).get("annotations") or {}).get(key, default))


def float_annotation(obj: Obj, key: str, default: float) -> float:
    """A numeric annotation; malformed or missing values give `default`."""
    try:
        value = float(annotation(obj, key, str(default)))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


def pod_is_ready(pod: Obj) -> bool:
    """Running with condition Ready=True and not being deleted."""
    return (
        pod.get("status", {}).get("phase") == "Running"
        and is_true(pod, "Ready")
        and not pod.get("metadata", {}).get("deletionTimestamp")
    )


def pod_is_terminal(pod: Obj) -> bool:
    """Succeeded or Failed."""
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def pod_is_active(pod: Obj) -> bool:
    """Neither terminal nor being deleted (what controllers count as a live replica)."""
    return not pod_is_terminal(pod) and not pod.get("metadata", {}).get("deletionTimestamp")


def target_port(pod: Obj, target: Any) -> int:
    """A Service targetPort (number or container port name) resolved against a pod; 0 if unknown."""
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in pod.get("spec", {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return 0


def pod_from_template(
    template: Obj,
    owner: Obj,
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """A Pod built from a PodTemplateSpec, controlled by `owner` (generateName `<owner>-` by default)."""
    tmeta = template.get("metadata") or {}
    md: Obj = {
        "namespace": owner["metadata"].get("namespace", "default"),
        "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
        "annotations": {**(tmeta.get("annotations") or {}), **(annotations or {})},
        "ownerReferences": [owner_ref(owner)],
    }
    if name:
        md["name"] = name
    else:
        md["generateName"] = owner["metadata"]["name"] + "-"
    spec = copy.deepcopy(template.get("spec") or {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    normalize_pod_spec(spec)
    for container in spec.get("containers") or []:
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
    return {"metadata": md, "spec": spec, "status": {"phase": "Pending"}}


def normalize_pod_spec(spec: Obj) -> Obj:
    """Quantities as strings, the way the API server stores them (custom resources may carry numbers,
    which typed clients reject when they read the pods made from them)."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") or {}
            for part in ("requests", "limits"):
                if isinstance(resources.get(part), dict):
                    resources[part] = {k: _quantity_text(v) for k, v in resources[part].items()}
    return spec


def _quantity_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def container_restarts(pods: Iterable[Obj]) -> int:
    """In-place container restarts across pods (what backoff limits count under OnFailure)."""
    return sum(
        int(cs.get("restartCount", 0))
        for pod in pods
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


def covering_mount(pod: Obj, container: Obj, path: str) -> tuple[Obj, Obj, str] | None:
    """The container's deepest volumeMount holding `path`: (mount, the pod's volume, the path below the mount with
    the mount's subPath in front), or None when no mount covers it."""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    for mount in sorted(container.get("volumeMounts") or [], key=lambda vm: -len(vm.get("mountPath", ""))):
        root = str(mount.get("mountPath", "")).rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            sub = str(mount.get("subPath") or "").strip("/")
            inside = "/".join(part for part in (sub, path[len(root) :].strip("/")) if part)
            return mount, volumes.get(mount.get("name")) or {}, inside
    return None
