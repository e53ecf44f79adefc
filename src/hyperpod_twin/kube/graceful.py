"""Graceful pod deletion as kube-apiserver's pod strategy does it: a grace period, then the kubelet's final delete."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hyperpod_twin.kube.store import ObjectStore, ResourceType

Obj = dict[str, Any]
PODS = ("", "pods")
DEFAULT_GRACE_SECONDS = 30  # the pod spec's terminationGracePeriodSeconds default


def stamp(ts: float) -> str:
    """A Unix timestamp as Kubernetes writes times (second precision, Z)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: str) -> float:
    """A Kubernetes time back to a Unix timestamp."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def grace_period(pod: Obj, options: Obj) -> int:
    """The pod strategy's period: the request's gracePeriodSeconds, else the pod's
    terminationGracePeriodSeconds (default 30); 0 for a pod never scheduled or already finished;
    a negative request means 1."""
    spec = pod.get("spec") or {}
    requested = options.get("gracePeriodSeconds")
    period = int(requested) if requested is not None else int(
        spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
    if not spec.get("nodeName"):
        period = 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    return 1 if period < 0 else period


def delete_pod(store: ObjectStore, rtype: ResourceType, pod: Obj, options: Obj,
               clock: Callable[[], float] = time.time) -> tuple[bool, Obj]:
    """DELETE of a pod: (gone, the pod as the API server returns it).

    A scheduled, running pod gets `deletionTimestamp` = now + period and `deletionGracePeriodSeconds`
    and stays (Terminating) until its kubelet deletes it with period 0; a later DELETE may only shorten
    the period. Pods are stored with ReturnDeletedObject, so the answer is the pod, never a Status.
    """
    meta = pod["metadata"]
    finalizers = bool(meta.get("finalizers"))
    current_grace = meta.get("deletionGracePeriodSeconds")
    requested = options.get("gracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        if current_grace and requested is not None and int(requested) < int(current_grace):
            period = max(int(requested), 0)
            started = parse_stamp(meta["deletionTimestamp"]) - int(current_grace)
            meta["deletionTimestamp"] = stamp(started + period)
            meta["deletionGracePeriodSeconds"] = period
            if period > 0 or finalizers:
                return False, store.update(rtype, pod)
        elif current_grace or finalizers:
            return False, pod  # graceful deletion already pending: nothing changes
    else:
        period = grace_period(pod, options)
        if period > 0 or finalizers:
            meta["deletionTimestamp"] = stamp(clock() + period)
            meta["deletionGracePeriodSeconds"] = period
            return False, store.update(rtype, pod)
    store.delete(rtype, meta.get("namespace", ""), meta["name"])
    return True, pod
