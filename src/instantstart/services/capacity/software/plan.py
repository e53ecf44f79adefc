"""cluster_update_plan: per instance group, current vs target release, the batches a rolling software update
would take, and which training jobs and model servers each batch interrupts (read from the pods on its nodes)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from sqlalchemy import select

from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.context import AppContext, CallContext
from instantstart.errors import InvalidInput, NotFound
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import inference as inf
from instantstart.manifests import ray_job as ray_m
from instantstart.manifests import training as train_m
from instantstart.manifests.labels import LABEL_APP
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.services.capacity.software.models import (
    BatchPlan,
    GroupPlan,
    SoftwareRequest,
    UpdatePlan,
    api_request,
    batch_size,
    batches,
)
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow

# A pod label that names the training job it belongs to, and the kind it names.
JOB_LABELS = ((train_m.POD_JOB_LABEL, "HyperPodPyTorchJob"), (ray_m.CLUSTER_LABEL, "RayCluster"),
              (ray_m.SUBMITTER_LABEL, "Job"), ("job-name", "Job"))
ORDER_NOTE = ("HyperPod picks the nodes of each batch itself; the plan takes them oldest first (LaunchTime to the "
              "millisecond, then instance id), the order the progress of hyperpod_update_software reports against.")


def row_for(db: Database, req: SoftwareRequest) -> ClusterRow:
    """The managed cluster the request names: by clusterArn, by clusterTag, else the active one (blocking)."""
    if req.cluster_arn and req.cluster_tag:
        raise InvalidInput("Invalid input: give clusterArn or clusterTag, not both.",
                           details={"fields": [{"field": "clusterArn", "message": "conflicts with clusterTag"}]})
    if not req.cluster_arn:
        return get_cluster(db, resolve_tag(db, req.cluster_tag))
    with db.session() as session:
        rows = list(session.scalars(select(ClusterRow)).all())
        for row in rows:
            session.expunge(row)
    for row in rows:
        if facts_of(row).hyperpod_cluster_arn == req.cluster_arn:
            return row
    raise NotFound(
        f"Invalid input: clusterArn: no managed cluster has HyperPod cluster {req.cluster_arn}",
        hint="cluster_list_all lists the managed clusters.",
        details={"fields": [{"field": "clusterArn", "message": "not a managed HyperPod cluster"}]},
    )


def chosen_groups(cluster: dict[str, Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """The DescribeCluster groups the request updates (every group when it names none); unknown names refused."""
    groups = {str(g["InstanceGroupName"]): g for g in cluster.get("InstanceGroups") or []}
    asked = [str(g["InstanceGroupName"]) for g in request.get("InstanceGroups") or []]
    unknown = [n for n in asked if n not in groups]
    if unknown:
        raise InvalidInput(
            f"Invalid input: instanceGroups: {', '.join(unknown)} not in {cluster.get('ClusterName')} "
            f"(groups: {', '.join(groups) or 'none'})",
            hint="cluster_get_instance_groups lists the groups.",
            details={"fields": [{"field": "instanceGroups", "message": f"unknown group {n}"} for n in unknown]},
        )
    return [groups[n] for n in asked] if asked else list(groups.values())


def update_order(nodes: list[dict[str, Any]]) -> list[str]:
    """Running nodes of a group (ListClusterNodes summaries), oldest first: the order batches take them."""
    running = [n for n in nodes if (n.get("InstanceStatus") or {}).get("Status") == "Running" and n.get("InstanceId")]
    return [str(n["InstanceId"]) for n in sorted(running, key=lambda n: (round(_stamp(n.get("LaunchTime")), 3),
                                                                          str(n["InstanceId"])))]


def _stamp(value: Any) -> float:
    if value is None:
        return 0.0
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


def group_nodes(sm: HyperPod, cluster: str, group: str) -> list[dict[str, Any]]:
    """ListClusterNodes of exactly one group (the API filters by substring)."""
    return [n for n in sm.list_nodes(cluster, group) if n.get("InstanceGroupName") == group]


def workloads_by_node(app: AppContext, row: ClusterRow) -> dict[str, list[dict[str, Any]]]:
    """Unfinished pods of the cluster by Node name (one list call; blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    selector = "status.phase!=Succeeded,status.phase!=Failed"
    listed = kube_call("list pods", core_kinds.list_pods, api, None, field_selector=selector)
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in listed.get("items") or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            out.setdefault(str(node), []).append(pod)
    return out


def interrupted(pods: list[dict[str, Any]]) -> tuple[list[str], list[str], int]:
    """(jobs, model servers, other pods) among pods a drain evicts (DaemonSet pods are not evicted)."""
    jobs: set[str] = set()
    servers: set[str] = set()
    other = 0
    for pod in pods:
        md = pod.get("metadata") or {}
        labels, ns = md.get("labels") or {}, md.get("namespace", "")
        if any(o.get("kind") == "DaemonSet" for o in md.get("ownerReferences") or []):
            continue
        job = next(((kind, labels[key]) for key, kind in JOB_LABELS if labels.get(key)), None)
        if job is not None:
            jobs.add(f"{job[0]} {ns}/{job[1]}")
        elif inf.LABEL_ENGINE in labels or inf.LABEL_COMPONENT in labels:
            servers.add(f"{ns}/{labels.get(LABEL_APP) or md.get('name')}")
        else:
            other += 1
    return sorted(jobs), sorted(servers), other


def build_plan(app: AppContext, row: ClusterRow, request: dict[str, Any]) -> UpdatePlan:
    """The plan of a software update of `row` with UpdateClusterSoftware's `request` (InstanceGroups,
    DeploymentConfig; blocking; reads only)."""
    sm = HyperPod(app.aws, row.region)
    name = hyperpod_cluster_name(row)
    cluster = sm.describe_cluster(name)
    if cluster is None:
        raise NotFound(f"HyperPod cluster {name} does not exist.", hint="cluster_get_status shows the cluster.")
    deployment = request.get("DeploymentConfig") or {}
    policy = deployment.get("RollingUpdatePolicy") or {}
    targets = {str(g["InstanceGroupName"]): g.get("ImageReleaseVersion") for g in request.get("InstanceGroups") or []}
    pods = workloads_by_node(app, row)
    groups: list[GroupPlan] = []
    for group in chosen_groups(cluster, request):
        gname = str(group["InstanceGroupName"])
        order = update_order(group_nodes(sm, name, gname))
        cut = batches(order, policy.get("MaximumBatchSize"))
        planned = []
        for number, batch in enumerate(cut, start=1):
            jobs, servers, other = interrupted([p for n in batch for p in pods.get(f"hyperpod-{n}", [])])
            planned.append(BatchPlan(number=number, nodes=batch, jobs=jobs, model_servers=servers, other_pods=other))
        groups.append(GroupPlan(
            instance_group=gname, nodes=len(order), current_release=group.get("CurrentImageReleaseVersion"),
            target_release=targets.get(gname) or "latest", image_version_status=group.get("ImageVersionStatus"),
            batch_size=batch_size(policy.get("MaximumBatchSize"), len(order)),
            rollback_batch_size=batch_size(policy.get("RollbackMaximumBatchSize"), len(order)), batches=planned,
        ))
    notes = [ORDER_NOTE, "Every node of a batch is drained (its pods are evicted) and goes SystemUpdating; the "
             "lifecycle scripts run again on it."]
    if not policy:
        notes.append("No rollingUpdatePolicy: every node of a group is updated at once.")
    return UpdatePlan(
        cluster_tag=row.tag, hyperpod_cluster=name,
        wait_interval_seconds=int(deployment.get("WaitIntervalInSeconds") or 0),
        alarms=[str(a["AlarmName"]) for a in deployment.get("AutoRollbackConfiguration") or []],
        groups=groups,
        interrupted_jobs=sorted({j for g in groups for b in g.batches for j in b.jobs}),
        interrupted_model_servers=sorted({s for g in groups for b in g.batches for s in b.model_servers}),
        notes=notes,
    )


@operation(
    "cluster_update_plan",
    method="POST",
    path="/capacity/software-update/plan",
    mutating=False,
    example={"deploymentConfig": {"rollingUpdatePolicy": {"maximumBatchSize": {"type": "INSTANCE_COUNT",
                                                                               "value": 2}}}},
)
async def cluster_update_plan(ctx: CallContext, req: SoftwareRequest) -> UpdatePlan:
    """Plan a HyperPod software update before running it (same arguments as hyperpod_update_software): per
    instance group the current and target release, the batches of nodes (rollingUpdatePolicy maximumBatchSize:
    INSTANCE_COUNT or CAPACITY_PERCENTAGE), and the training jobs and model servers each batch would interrupt
    (their pods are evicted while the batch updates). Changes nothing."""
    row = await to_thread.run_sync(row_for, ctx.app.db, req)
    return await to_thread.run_sync(build_plan, ctx.app, row, api_request(req))
