"""cluster_validate: DCGM diagnostic and EFA check per node, nccl-tests all-reduce per node pair and across all."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import Conflict, NotFound, PreconditionFailed
from instantstart.kube import core_kinds, custom_objects, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.reads import crds_served
from instantstart.manifests import validation as validation_manifests
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, next_poll
from instantstart.services.base import hardware_output as parse
from instantstart.services.base.registry import ClusterParams, get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.capacity.validate_report import report
from instantstart.validation import ClusterTag

KIND = "cluster_validate"
CHECK_SECONDS = 1200  # image pull + `dcgmi diag -r 2` (a few minutes on 8 GPUs)
NCCL_SECONDS = 1800  # workers scheduled, sshd up, all_reduce_perf from 8 B to 2 GiB
LOG_BYTES = 4 * 1024 * 1024  # NCCL_DEBUG=INFO of 16+ ranks is long; the table is at the end
MPIJOB = ("kubeflow.org", "v2beta1", "mpijobs")
NODE_NAME = r"^hyperpod-i-[0-9a-f]{8}([0-9a-f]{9})?$"
TERMINAL = ("Succeeded", "Failed")
JOB_LABEL = "training.kubeflow.org/job-name"


class ValidateRequest(WireModel):
    """Which nodes to validate (default: every Ready node with GPUs)."""

    cluster_tag: ClusterTag | None = None
    nodes: list[str] | None = Field(default=None, min_length=1, max_length=64,
                                    description="Kubernetes Node names hyperpod-i-…; default every Ready GPU node.")


class ValidateParams(ClusterParams):
    """Params of cluster_validate: the nodes, in order."""

    nodes: list[str]


def run_name(operation_id: str) -> str:
    """The prefix of every object one validation creates (DNS-1123, from the operation id)."""
    return "validate-" + re.sub(r"[^a-z0-9]", "", operation_id.lower())[-10:]


def _alloc(node: dict[str, Any], resource: str) -> int:
    value = str(wire.allocatable(node).get(resource, "0"))
    return int(value) if value.isdigit() else 0


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def list_nodes(api: Api) -> list[dict[str, Any]]:
    """Every Kubernetes Node as a wire dict (blocking)."""
    return wire.items(kube_call("list Nodes", core_kinds.list_nodes, api))


def choose_nodes(nodes: list[dict[str, Any]], asked: list[str] | None) -> list[str]:
    """The nodes to validate: those asked (each must exist and be Ready), or every Ready node with GPUs."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    candidates = sorted(name for name, n in by_name.items() if _ready(n) and _alloc(n, validation_manifests.GPU))
    if asked is None:
        if not candidates:
            raise PreconditionFailed("The cluster has no Ready node with GPUs to validate.",
                                     hint="cluster_get_status lists the nodes; add or scale a GPU instance group.")
        return candidates
    for name in asked:
        if not re.match(NODE_NAME, name) or name not in by_name or not _ready(by_name[name]):
            raise NotFound(f"Invalid input: nodes: {name} is not a Ready node of this cluster",
                           hint=f"Ready GPU nodes: {', '.join(candidates) or 'none'}.",
                           details={"fields": [{"field": "nodes", "message": "not a Ready node"}]})
    return sorted(set(asked))


@operation("cluster_validate", method="POST", path="/capacity/validate", completion="operation_get",
           destructive=False, idempotent=False, example={})
async def cluster_validate(ctx: CallContext, req: ValidateRequest) -> OperationRef:
    """Validate GPU nodes before a job: per node a DCGM diagnostic (`dcgmi diag -r 2`, all GPUs) and an EFA check
    (`fi_info -p efa`), then nccl-tests all_reduce_perf (MPIJob, FI_PROVIDER=efa) per node pair and across all
    nodes. Check pods wait for free GPUs (busy nodes end `not-run`). Finished when every test ran; the
    operation_get result lists per node the verdict, best pair bus bandwidth, stragglers, failed checks and the
    next step (hyperpod_node_reboot / hyperpod_node_replace with its nodeId). Needs the MPI operator (HyperPod
    dependencies chart) for the NCCL part; without it the NCCL part is reported skipped."""
    replayed = await ctx.app.runner.replay(KIND, ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
    chosen = choose_nodes(await blocking(list_nodes, api), req.nodes)
    return await submit_for_cluster(ctx, KIND, tag, ValidateParams(cluster_tag=tag, region=row.region, nodes=chosen),
                                    status_tool="operation_get", poll_after_seconds=30)


def _create(api: Api, body: dict[str, Any]) -> None:
    """Create a pod or MPIJob; one left by an earlier attempt of this stage is kept (blocking)."""
    try:
        if body["kind"] == "Pod":
            kube_call(f"create Pod {body['metadata']['name']}", core_kinds.create_pod, api,
                      validation_manifests.NAMESPACE, body)
        else:
            group, version, plural = MPIJOB
            kube_call(f"create MPIJob {body['metadata']['name']}",
                      custom_objects.create_custom, api, group, version,
                      validation_manifests.NAMESPACE, plural, body)
    except Conflict:
        pass


def _pods(api: Api, selector: str) -> dict[str, dict[str, Any]]:
    found = kube_call("list validation pods", core_kinds.list_pods, api,
                      validation_manifests.NAMESPACE, label_selector=selector)
    return {wire.name(p): p for p in wire.items(found)}


def _log(api: Api, pod: str) -> str:
    text = kube_call(
        f"read the log of {pod}",
        core_kinds.read_pod_log, api,
        pod,
        validation_manifests.NAMESPACE,
        limit_bytes=LOG_BYTES,
    )
    return str(text or "")


def _by_job(pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Launcher pods by their MPIJob (the operator names them `<job>-launcher[-<hash>]`; the newest wins)."""
    ordered = sorted(pods.values(), key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
    return {str((p["metadata"].get("labels") or {}).get(JOB_LABEL)): p for p in ordered}


async def _wait_terminal(stage: StageContext, api: Api, selector: str, want: set[str], limit: float,
                         what: str, by_job: bool = False) -> dict[str, dict[str, Any]]:
    """Poll the pods matching `selector` until every one keyed in `want` (pod name, or MPIJob name when `by_job`) is
    terminal or `limit` seconds pass; the pods as last seen, by that key (one still waiting is reported not-run)."""
    started = time.monotonic()
    last = ""
    while True:
        listed = await blocking(_pods, api, selector)
        pods = _by_job(listed) if by_job else listed
        done = {n for n in want if (pods.get(n, {}).get("status") or {}).get("phase") in TERMINAL}
        message = f"{what}: {len(done)}/{len(want)} finished"
        if message != last:
            await stage.progress(message)
            last = message
        if done == want or time.monotonic() - started > limit:
            return pods
        await asyncio.sleep(next_poll(time.monotonic() - started, stage.app.settings.poll_seconds))


def _facts(node: dict[str, Any]) -> dict[str, Any]:
    labels = node["metadata"].get("labels") or {}
    return {
        "instanceType": labels.get(INSTANCE_TYPE_LABEL),
        "gpus": _alloc(node, validation_manifests.GPU),
        "efaDevices": _alloc(node, validation_manifests.EFA),
    }


def _check_result(check: str, pod: dict[str, Any] | None, log: str | None) -> dict[str, Any]:
    phase = ((pod or {}).get("status") or {}).get("phase")
    if pod is None or phase not in TERMINAL or log is None:
        return {"status": "not-run", "reason": f"the check pod did not finish (phase {phase or 'absent'})"}
    if check == "dcgm":
        dcgm = parse.parse_dcgm_diag(log)
        if not dcgm.completed:
            return {"status": "not-run", "reason": "dcgmi printed no diagnostic table"}
        return {"status": "passed" if dcgm.passed else "failed", "failed": dcgm.failed, "warned": dcgm.warned,
                "tests": dcgm.tests}
    efa = parse.parse_fi_info(log)
    if not efa.completed:
        return {"status": "not-run", "reason": "fi_info printed neither providers nor an error"}
    return {"status": "ok" if efa.available else "missing", "devices": efa.devices}


async def stage_checks(stage: StageContext) -> dict[str, Any]:
    """Per node: a DCGM diagnostic pod (GPU nodes) and an EFA pod (nodes whose type has EFA), pinned to it."""
    p = stage.params_as(ValidateParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    api = await blocking(kube_api, stage.app.kube, row.eks_cluster_name, row.region)
    run = run_name(stage.operation_id)
    nodes = {n["metadata"]["name"]: n for n in await blocking(list_nodes, api) if n["metadata"]["name"] in p.nodes}
    absent = {"gpus": 0, "efaDevices": 0}
    facts: dict[str, dict[str, Any]] = {n: _facts(nodes[n]) if n in nodes else dict(absent) for n in p.nodes}
    wanted: dict[str, tuple[str, str]] = {}  # pod name → (node, check)
    for index, name in enumerate(p.nodes):
        for check, needs in (("dcgm", "gpus"), ("efa", "efaDevices")):
            if facts[name][needs]:
                body = validation_manifests.check_pod(
                    run, check, name, index, facts[name]["gpus"], facts[name]["efaDevices"]
                )
                await blocking(_create, api, body)
                wanted[body["metadata"]["name"]] = (name, check)
    selector = f"{validation_manifests.RUN_LABEL}={run}"
    pods = await _wait_terminal(stage, api, selector, set(wanted), CHECK_SECONDS, "node checks")
    for pod_name, (node, check) in wanted.items():
        pod = pods.get(pod_name)
        done = ((pod or {}).get("status") or {}).get("phase") in TERMINAL
        log = await blocking(_log, api, pod_name) if done else None
        facts[node][check] = _check_result(check, pod, log)
    for node in p.nodes:
        for check, needs in (("dcgm", "gpus"), ("efa", "efaDevices")):
            facts[node].setdefault(check, {"status": "not-applicable", "reason": f"the node has no {needs}"})
    for pod_name in wanted:
        await blocking(_delete_pod, api, pod_name)
    return {"nodes": facts}


def _delete_pod(api: Api, name: str) -> None:
    with contextlib.suppress(NotFound):
        kube_call(f"delete Pod {name}", core_kinds.delete_pod, api, name, validation_manifests.NAMESPACE)


def _delete_job(api: Api, name: str) -> None:
    group, version, plural = MPIJOB
    with contextlib.suppress(NotFound):
        kube_call(f"delete MPIJob {name}", custom_objects.delete_custom, api, group, version,
                  validation_manifests.NAMESPACE, plural, name, propagation_policy="Background")


def _nccl_result(nodes: list[str], job: str, pod: dict[str, Any] | None, log: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes, "job": job, "busbwGbps": None, "avgBusbwGbps": None,
                           "transport": "unknown"}
    if log is None:
        return out | {"status": "not-run", "reason": "the launcher did not finish (workers not scheduled: GPUs busy?)"}
    result = parse.parse_nccl_tests(log)
    out |= {"busbwGbps": result.peak_busbw, "avgBusbwGbps": result.avg_busbw, "transport": result.transport,
            "wrong": result.wrong}
    ok = result.completed and result.wrong == 0 and ((pod or {}).get("status") or {}).get("phase") == "Succeeded"
    return out | {"status": "passed" if ok else "failed"}


async def _run_jobs(stage: StageContext, api: Api, run: str, groups: list[list[str]],
                    facts: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """Run one MPIJob per node group at once; their parsed results, in order."""
    jobs: dict[str, list[str]] = {}
    for group in groups:
        name = f"{run}-{label}-{len(jobs)}"
        gpus = min(facts[n]["gpus"] for n in group)
        efa = min(facts[n]["efaDevices"] for n in group)
        await blocking(_create, api, validation_manifests.nccl_mpijob(run, name, group, gpus, efa))
        jobs[name] = group
    selector = (f"{validation_manifests.RUN_LABEL}={run},{validation_manifests.CHECK_LABEL}=nccl,"
                "training.kubeflow.org/job-role=launcher")
    by_job = await _wait_terminal(stage, api, selector, set(jobs), NCCL_SECONDS, f"nccl-tests ({label})", by_job=True)
    results = []
    for name, group in jobs.items():
        pod = by_job.get(name)
        done = ((pod or {}).get("status") or {}).get("phase") in TERMINAL
        log = await blocking(_log, api, pod["metadata"]["name"]) if pod is not None and done else None
        results.append(_nccl_result(group, name, pod, log))
        await blocking(_delete_job, api, name)
    return results


async def stage_nccl(stage: StageContext) -> dict[str, Any]:
    """nccl-tests per ring pair (rounds of disjoint pairs run together), then across every node."""
    p = stage.params_as(ValidateParams)
    facts = stage.outputs["checks"]["nodes"]
    eligible = [n for n in p.nodes if facts[n]["gpus"]]
    if len(eligible) < 2:
        return {"skipped": "an all-reduce across nodes needs two or more GPU nodes", "pairs": [], "all": None}
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    api = await blocking(kube_api, stage.app.kube, row.eks_cluster_name, row.region)
    if not await blocking(crds_served, api, ("mpijobs.kubeflow.org",)):
        return {"skipped": "the MPIJob CRD is not installed: the MPI operator comes with the HyperPod dependencies "
                           "chart (cluster_create installs it)", "pairs": [], "all": None}
    run = run_name(stage.operation_id)
    pairs: list[dict[str, Any]] = []
    for number, pairing in enumerate(validation_manifests.pair_rounds(eligible)):
        pairs += await _run_jobs(stage, api, run, [list(pair) for pair in pairing], facts, f"pair{number}")
    whole = (await _run_jobs(stage, api, run, [eligible], facts, "all"))[0] if len(eligible) > 2 else None
    return {"pairs": pairs, "all": whole}


KINDS.register(OperationKind(
    name=KIND, params=ValidateParams, result_from=report,
    stages=(StageSpec("checks", stage_checks, max_attempts=2, timeout_seconds=CHECK_SECONDS + 300),
            StageSpec("nccl", stage_nccl, max_attempts=2, timeout_seconds=5 * NCCL_SECONDS)),
))
