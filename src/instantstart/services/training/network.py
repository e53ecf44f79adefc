"""Which network a multi-node training job's NCCL uses (EFA or TCP sockets), read from its pods' logs."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.services.base.hardware_output import Transport, nccl_transport
from instantstart.services.training.models import JobPod
from instantstart.store.models import ClusterRow

HEAD_BYTES = 256 * 1024  # NCCL prints its network choice at communicator init, near the start of the log
UNKNOWN_SECONDS = 30.0  # a pod with no NCCL line yet is read again after this, not on every status call
_SEEN_LIMIT = 4096
# A pod's choice never changes once logged; "unknown" is kept for UNKNOWN_SECONDS (NCCL_DEBUG may be off).
_seen: OrderedDict[tuple[str, str, str, str, int], tuple[Transport, float]] = OrderedDict()
_seen_lock = threading.Lock()


class NetworkUse(WireModel):
    """Whether NCCL runs over EFA (aws-ofi-nccl) or fell back to TCP sockets, from NCCL_DEBUG=INFO log lines."""

    transport: Literal["efa", "socket", "unknown", "single-node"] = Field(
        description="efa: every pod logged NET/OFI; socket: a pod logged NET/Socket (the whole ring runs at socket "
                    "speed); unknown: no NCCL network line yet (set NCCL_DEBUG=INFO); single-node: no network used.")
    pods: dict[str, Transport] = Field(default_factory=dict, description="Per pod (names from the API).")
    warning: str | None = None


def _read_head(api: Api, namespace: str, pod: str) -> str:
    text = kube_call(f"read the log of {namespace}/{pod}", core_kinds.read_pod_log, api, pod,
                     namespace, limit_bytes=HEAD_BYTES)
    return str(text or "")


def _pod_transport(api: Api, cluster: str, namespace: str, pod: JobPod) -> Transport:
    key = (cluster, namespace, pod.name, pod.node or "", pod.restarts)
    now = time.monotonic()
    with _seen_lock:
        kept = _seen.get(key)
        if kept is not None and (kept[0] != "unknown" or now - kept[1] < UNKNOWN_SECONDS):
            return kept[0]
    try:
        found = nccl_transport(_read_head(api, namespace, pod.name))
    except InstantStartError:  # the container has not started, or its log is gone: not known (yet)
        return "unknown"
    with _seen_lock:
        _seen[key] = (found, now)
        while len(_seen) > _SEEN_LIMIT:
            _seen.popitem(last=False)
    return found


def network_use(app: AppContext, row: ClusterRow, obj: dict[str, Any], pods: list[JobPod],
                namespace: str) -> NetworkUse:
    """The network of a HyperPodPyTorchJob's NCCL (blocking): read only for jobs on two or more nodes, only known
    NCCL line shapes matched (log text is never returned), a warning when a multi-node job runs on sockets."""
    replicas = sum(int(s.get("replicas") or 1) for s in (obj.get("spec") or {}).get("replicaSpecs") or [{}])
    if replicas < 2 and len({p.node for p in pods if p.node}) < 2:
        return NetworkUse(transport="single-node")
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    started = [p for p in pods if p.phase in ("Running", "Succeeded", "Failed")]
    per_pod = {p.name: _pod_transport(api, row.eks_cluster_name, namespace, p) for p in started}
    socket = sorted(name for name, t in per_pod.items() if t == "socket")
    if socket:
        return NetworkUse(transport="socket", pods=per_pod, warning=(
            f"Multi-node job without EFA: NCCL on {', '.join(socket)} uses TCP sockets (NET/Socket), so every "
            "collective runs at a fraction of EFA bandwidth. Request the vpc.amazonaws.com/efa devices of an EFA "
            "instance type in the job's pods, and check the nodes with cluster_validate."))
    if per_pod and all(t == "efa" for t in per_pod.values()):
        return NetworkUse(transport="efa", pods=per_pod)
    return NetworkUse(transport="unknown", pods=per_pod, warning=(
        "No NCCL network line in the pods' logs yet: NCCL prints its choice at communicator init when "
        "NCCL_DEBUG=INFO is set (env NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET)."))
