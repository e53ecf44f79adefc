"""The HyperPod cluster API's routes: create, update, describe, delete and list clusters, then the node operations."""

from __future__ import annotations

import functools

from .context import AwsContext
from .protocol import AwsRequest, RawResponse, json_response, page
from .sagemaker_hyperpod import SM, HyperPod
from .sagemaker_nodes import register_node_ops


def describe_cluster(hp: HyperPod, req: AwsRequest) -> RawResponse:
    """DescribeCluster."""
    with hp.ctx.locked():
        return json_response(req, hp.describe(hp.get(req.region, req.params.get("ClusterName"))))


def delete_cluster(hp: HyperPod, req: AwsRequest) -> RawResponse:
    """DeleteCluster: the cluster goes Deleting (a second call while Deleting changes nothing)."""
    with hp.ctx.locked():
        cluster = hp.get(req.region, req.params.get("ClusterName"))
        if cluster.status != "Deleting":
            cluster.add_event(hp.ctx.clock.wall(), "Cluster deletion started")
            hp.life.delete_cluster(cluster)
    return json_response(req, {"ClusterArn": cluster.arn})


def list_clusters(hp: HyperPod, req: AwsRequest) -> RawResponse:
    """ListClusters with its name, creation-time and training-plan filters and sort orders."""
    p = req.params
    with hp.ctx.locked():
        items = [c for c in hp.life.clusters.values() if c.region == req.region]
        if p.get("NameContains"):
            items = [c for c in items if str(p["NameContains"]) in c.name]
        if p.get("CreationTimeAfter") is not None:
            items = [c for c in items if c.creation_time > float(p["CreationTimeAfter"])]
        if p.get("CreationTimeBefore") is not None:
            items = [c for c in items if c.creation_time < float(p["CreationTimeBefore"])]
        if p.get("TrainingPlanArn"):
            items = [
                c
                for c in items
                if any(g.spec.get("TrainingPlanArn") == p["TrainingPlanArn"] for g in c.groups.values())
            ]
        if p.get("SortBy") == "NAME":
            items.sort(key=lambda c: c.name, reverse=p.get("SortOrder") == "Descending")
        else:
            # CREATION_TIME and Ascending are the defaults (the model says so).
            items.sort(key=lambda c: c.creation_time, reverse=p.get("SortOrder") == "Descending")
        summaries = [
            {
                "ClusterArn": c.arn,
                "ClusterName": c.name,
                "CreationTime": c.creation_time,
                "ClusterStatus": c.status,
                "TrainingPlanArns": sorted(
                    {str(g.spec["TrainingPlanArn"]) for g in c.groups.values() if g.spec.get("TrainingPlanArn")}
                ),
            }
            for c in items
        ]
    return json_response(req, page(p, summaries, "ClusterSummaries"))


def register(ctx: AwsContext, hp: HyperPod) -> None:
    """Answer the HyperPod cluster API."""
    ctx.route(SM, "CreateCluster")(hp.create)
    ctx.route(SM, "UpdateCluster")(hp.update)
    for operation, handler in (
        ("DescribeCluster", describe_cluster),
        ("DeleteCluster", delete_cluster),
        ("ListClusters", list_clusters),
    ):
        ctx.route(SM, operation)(functools.partial(handler, hp))
    register_node_ops(ctx, hp)
    ctx.on_reset(hp.reset)
