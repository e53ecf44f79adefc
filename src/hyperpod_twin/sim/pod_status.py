"""What the kubelet reports of a pod: its IP, QoS class and container statuses, and whether a run fails."""

from __future__ import annotations

import hashlib

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj


def runs_to_completion(pod: Obj) -> bool:
    """Pods whose containers are not restarted after a clean exit (Jobs, training replicas)."""
    return pod.get("spec", {}).get("restartPolicy", "Always") in ("Never", "OnFailure")


def should_fail(pod: Obj, restarts: int = 0) -> bool:
    """Whether this attempt's main container exits non-zero (twin annotations on the pod).

    The attempt number is the controller's retry index (annotation) plus in-place container
    restarts, so `fail-attempts` works for restartPolicy OnFailure/Always too.
    """
    if kobj.annotation(pod, kobj.FAIL).lower() in ("true", "1", "yes"):
        return True
    attempts = kobj.annotation(pod, kobj.FAIL_ATTEMPTS)
    if attempts.isdigit():
        attempt = kobj.annotation(pod, kobj.ATTEMPT, "0")
        return (int(attempt) if attempt.isdigit() else 0) + restarts < int(attempts)
    return False


def pod_ip(uid: str) -> str:
    """A stable pod IP in the twin's pod CIDR."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"10.2.{digest[0]}.{max(digest[1], 2)}"


def container_status(container: Obj, *, running_since: str | None, ready: bool, restarts: int) -> Obj:
    """A containerStatuses entry (running when `running_since` is set)."""
    image = str(container.get("image", ""))
    status: Obj = {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"{image}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": f"containerd://{hashlib.sha256(container['name'].encode()).hexdigest()[:32]}",
        "ready": ready,
        "started": running_since is not None,
        "restartCount": restarts,
    }
    if running_since is not None:
        status["state"] = {"running": {"startedAt": running_since}}
    return status


def internal_ip(node: Obj) -> str:
    """The node's InternalIP address, or an empty string."""
    for address in node.get("status", {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


def qos_class(pod: Obj) -> str:
    """The pod's QoS class: BestEffort, Burstable or Guaranteed, from its containers' requests and limits."""
    containers = pod.get("spec", {}).get("containers") or []
    if not any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits") for c in containers
    ):
        return "BestEffort"
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if not {"cpu", "memory"} <= set(limits) or any(
            str(requests.get(k, limits[k])) != str(limits[k]) for k in limits
        ):
            return "Burstable"
    return "Guaranteed"
