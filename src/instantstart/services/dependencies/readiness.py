"""Readiness of a dependency's DaemonSets and Deployments, read through the Kubernetes API and waited for."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from instantstart.context import AppContext
from instantstart.errors import DependencyFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.gateway import api_status
from instantstart.operations.waiting import blocking, next_poll
from instantstart.services.dependencies.catalog import Dependency, WorkloadRef
from instantstart.services.dependencies.results import DepResult, Target

READY_TIMEOUT = 10 * 60


def workload_refs(dep: Dependency) -> list[tuple[str, WorkloadRef]]:
    """The (kind, ref) pairs whose readiness makes the dependency ready."""
    return [("DaemonSet", r) for r in dep.readiness.daemon_sets] + [
        ("Deployment", r) for r in dep.readiness.deployments
    ]


async def wait_ready(app: AppContext, target: Target, dep: Dependency, result: DepResult) -> None:
    """Wait until every workload of `dep` is ready (result.actual["workloads"] follows); DependencyFailed after
    READY_TIMEOUT naming what is not ready."""
    refs = workload_refs(dep)
    if not refs:
        return
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        states = await blocking(workload_states, app, target, refs)
        waiting = [s for s in states if not s["ready"]]
        result.actual["workloads"] = states
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise DependencyFailed(
                f"{dep.name}: not ready: "
                + "; ".join(f"{s['kind']} {s['namespace']}/{s['name']}: {s['message']}" for s in waiting),
                hint="Check the workloads' pods (events, image pulls), then run cluster_configure_dependencies again.",
                retryable=True,
            )
        waited = time.monotonic() - (deadline - READY_TIMEOUT)
        await asyncio.sleep(next_poll(waited, app.settings.poll_seconds))


def workload_states(app: AppContext, target: Target, refs: list[tuple[str, WorkloadRef]]) -> list[dict[str, Any]]:
    """Readiness of DaemonSets and Deployments through the Kubernetes API (blocking)."""
    api = app.kube.api_client(target.eks_cluster_name, target.region)
    out = []
    for kind, ref in refs:
        state: dict[str, Any] = {"kind": kind, "namespace": ref.namespace, "name": ref.name}
        try:
            if kind == "DaemonSet":
                ds = core_kinds.read_daemon_set(api, ref.name, ref.namespace)
                desired = wire.status(ds).get("desiredNumberScheduled")
                ready = int(wire.status(ds).get("numberReady") or 0)
            else:
                dep = core_kinds.read_deployment(api, ref.name, ref.namespace)
                desired = wire.replicas(dep, default=1)
                ready = wire.ready_replicas(dep)
                if wire.status(dep).get("observedGeneration") is None:
                    desired = None
        except Exception as exc:
            if api_status(exc) != 404:
                raise
            state.update(exists=False, ready=False, desired=None, readyCount=0, message="not found")
            out.append(state)
            continue
        done = desired is not None and ready >= desired
        message = "status not reported yet" if desired is None else f"{ready}/{desired} ready"
        if done and desired == 0:
            message = "0/0 ready (no matching nodes yet)"
        state.update(exists=True, ready=done, desired=desired, readyCount=ready, message=message)
        out.append(state)
    return out
