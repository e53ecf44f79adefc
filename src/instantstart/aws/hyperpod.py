"""SageMaker HyperPod calls: clusters, instance groups, nodes, events, training plans (blocking, errors translated)."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate
from instantstart.aws.paging import collect

_GONE = ("ResourceNotFound", "ResourceNotFoundException")


def describe_cluster(aws: AwsClients, region: str, name: str) -> dict[str, Any] | None:
    """DescribeCluster of HyperPod cluster `name`, or None when it does not exist."""
    try:
        return cast("dict[str, Any]", aws.sagemaker(region).describe_cluster(ClusterName=name))
    except Exception as exc:
        code = error_code(exc)
        if code in _GONE or (code == "ValidationException" and "not found" in str(exc).lower()):
            return None
        raise translate(exc, f"describe HyperPod cluster {name}") from exc


def cluster_status(aws: AwsClients, region: str, name: str) -> str | None:
    """The ClusterStatus of `name` (None when it does not exist)."""
    found = describe_cluster(aws, region, name)
    return None if found is None else str(found.get("ClusterStatus"))


def list_clusters(aws: AwsClients, region: str) -> list[dict[str, Any]]:
    """DescribeCluster of every HyperPod cluster of the Region (every ListClusters page)."""
    sm = aws.sagemaker(region)
    summaries = collect("list HyperPod clusters", sm, "list_clusters", "ClusterSummaries", MaxResults=100)
    found = []
    for summary in summaries:
        name = summary["ClusterName"]
        found.append(
            cast("dict[str, Any]", call(f"describe HyperPod cluster {name}", sm.describe_cluster, ClusterName=name))
        )
    return found


def create_cluster(aws: AwsClients, region: str, request: dict[str, Any]) -> str:
    """CreateCluster with a request built by `manifests.hyperpod.create_cluster_request`; the cluster ARN."""
    name = request.get("ClusterName", "")
    return str(call(f"create HyperPod cluster {name}", aws.sagemaker(region).create_cluster, **request)["ClusterArn"])


def update_cluster(aws: AwsClients, region: str, action: str, **request: Any) -> None:
    """UpdateCluster (instance groups to add/scale/delete, AutoScaling, ClusterRole); `action` names it."""
    call(action, aws.sagemaker(region).update_cluster, **request)


def update_cluster_software(aws: AwsClients, region: str, name: str, **request: Any) -> None:
    """UpdateClusterSoftware: every group (or the request's InstanceGroups) to the latest HyperPod AMI (or each
    group's ImageReleaseVersion), all at once or as the request's DeploymentConfig rolls it."""
    call(f"update the software of {name}", aws.sagemaker(region).update_cluster_software, ClusterName=name,
         **request)


def delete_cluster(aws: AwsClients, region: str, name: str) -> None:
    """DeleteCluster (asynchronous: the cluster goes through Deleting)."""
    call(f"delete HyperPod cluster {name}", aws.sagemaker(region).delete_cluster, ClusterName=name)


def list_events(aws: AwsClients, region: str, name: str, group: str | None = None) -> list[dict[str, Any]]:
    """The cluster's latest events (of one instance group when `group` is given); [] when they cannot be read."""
    kwargs: dict[str, Any] = {"ClusterName": name, "MaxResults": 100}
    if group:
        kwargs["InstanceGroupName"] = group
    try:
        return cast("list[dict[str, Any]]", aws.sagemaker(region).list_cluster_events(**kwargs).get("Events", []))
    except Exception:
        return []


def query_events(aws: AwsClients, region: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """ListClusterEvents with the caller's filters (errors translated)."""
    answer = call(f"list the events of {request.get('ClusterName')}", aws.sagemaker(region).list_cluster_events,
                  **request)
    return cast("list[dict[str, Any]]", answer.get("Events", []))


def describe_node(aws: AwsClients, region: str, cluster: str, node: str) -> dict[str, Any] | None:
    """DescribeClusterNode's NodeDetails, or None when the node is gone."""
    try:
        answer = aws.sagemaker(region).describe_cluster_node(ClusterName=cluster, NodeId=node)
        return cast("dict[str, Any]", answer["NodeDetails"])
    except Exception as exc:
        if error_code(exc) in ("ResourceNotFound", "ValidationException"):
            return None
        raise translate(exc, f"describe node {node}") from exc


def list_nodes(aws: AwsClients, region: str, cluster: str, group: str) -> list[dict[str, Any]]:
    """ListClusterNodes summaries of the nodes whose group name contains `group`."""
    return collect(f"list nodes of {cluster}", aws.sagemaker(region), "list_cluster_nodes", "ClusterNodeSummaries",
                   ClusterName=cluster, InstanceGroupNameContains=group)


def batch_node_action(aws: AwsClients, region: str, cluster: str, node: str, action: str) -> list[dict[str, Any]]:
    """One Batch{Reboot,Replace,Delete}ClusterNodes call for one node; the per-node failures it reports."""
    sm = aws.sagemaker(region)
    fn: Any = {
        "reboot": sm.batch_reboot_cluster_nodes,
        "replace": sm.batch_replace_cluster_nodes,
        "delete": sm.batch_delete_cluster_nodes,
    }[action]
    answer = call(f"{action} node {node}", fn, ClusterName=cluster, NodeIds=[node])
    return cast("list[dict[str, Any]]", answer.get("Failed") or [])


def describe_training_plan(aws: AwsClients, region: str, arn: str) -> dict[str, Any]:
    """DescribeTrainingPlan."""
    sm = aws.sagemaker(region)
    return cast(
        "dict[str, Any]", call(f"describe training plan {arn}", sm.describe_training_plan, TrainingPlanName=arn)
    )


class HyperPod:
    """The HyperPod calls above bound to one Region (for services that make several in a row)."""

    def __init__(self, aws: AwsClients, region: str) -> None:
        self.aws = aws
        self.region = region

    def describe_cluster(self, name: str) -> dict[str, Any] | None:
        """DescribeCluster, or None when the cluster does not exist."""
        return describe_cluster(self.aws, self.region, name)

    def list_events(self, name: str, group: str | None = None) -> list[dict[str, Any]]:
        """The cluster's latest events (of one group); [] when they cannot be read."""
        return list_events(self.aws, self.region, name, group)

    def update_cluster(self, action: str, **request: Any) -> None:
        """UpdateCluster; `action` names it in errors."""
        update_cluster(self.aws, self.region, action, **request)

    def update_cluster_software(self, name: str, **request: Any) -> None:
        """UpdateClusterSoftware (InstanceGroups, DeploymentConfig as the API takes them)."""
        update_cluster_software(self.aws, self.region, name, **request)

    def describe_node(self, cluster: str, node: str) -> dict[str, Any] | None:
        """DescribeClusterNode's NodeDetails, or None when the node is gone."""
        return describe_node(self.aws, self.region, cluster, node)

    def list_nodes(self, cluster: str, group: str) -> list[dict[str, Any]]:
        """ListClusterNodes summaries of one group."""
        return list_nodes(self.aws, self.region, cluster, group)

    def batch_node_action(self, cluster: str, node: str, action: str) -> list[dict[str, Any]]:
        """One Batch{Reboot,Replace,Delete}ClusterNodes call; the failures it reports."""
        return batch_node_action(self.aws, self.region, cluster, node, action)

    def describe_training_plan(self, arn: str) -> dict[str, Any]:
        """DescribeTrainingPlan."""
        return describe_training_plan(self.aws, self.region, arn)


def cluster_tags(aws: AwsClients, region: str, arn: str) -> dict[str, str]:
    """The tags of a HyperPod cluster (ListTags) as a map."""
    answer = call(f"list the tags of {arn}", aws.sagemaker(region).list_tags, ResourceArn=arn)
    return {str(t["Key"]): str(t.get("Value", "")) for t in answer.get("Tags", [])}


def tag_cluster(aws: AwsClients, region: str, arn: str, tags: dict[str, str]) -> None:
    """AddTags on a HyperPod cluster."""
    call(
        f"tag {arn}",
        aws.sagemaker(region).add_tags,
        ResourceArn=arn,
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )
