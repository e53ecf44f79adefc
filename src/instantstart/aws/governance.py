"""SageMaker HyperPod task governance calls: the cluster's scheduler config (cluster policy) and one compute quota
per team (blocking, errors translated)."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate
from instantstart.aws.paging import collect


def scheduler_config(aws: AwsClients, region: str, cluster_arn: str) -> dict[str, Any] | None:
    """DescribeClusterSchedulerConfig of the cluster's scheduler config, or None when it has none."""
    sm = aws.sagemaker(region)
    found = collect("list cluster scheduler configs", sm, "list_cluster_scheduler_configs",
                    "ClusterSchedulerConfigSummaries", ClusterArn=cluster_arn)
    live = [s for s in found if s.get("Status") not in ("Deleting", "Deleted")]
    if not live:
        return None
    return cast("dict[str, Any]", call("describe the cluster scheduler config", sm.describe_cluster_scheduler_config,
                                       ClusterSchedulerConfigId=live[0]["ClusterSchedulerConfigId"]))


def put_scheduler_config(aws: AwsClients, region: str, cluster_arn: str, name: str, config: dict[str, Any]) -> str:
    """Create the cluster's scheduler config, or update it to `config` when it has one; its id."""
    sm = aws.sagemaker(region)
    current = scheduler_config(aws, region, cluster_arn)
    if current is None:
        return str(call("create the cluster scheduler config", sm.create_cluster_scheduler_config, Name=name,
                        ClusterArn=cluster_arn, SchedulerConfig=config)["ClusterSchedulerConfigId"])
    if current.get("SchedulerConfig") != config:
        call("update the cluster scheduler config", sm.update_cluster_scheduler_config,
             ClusterSchedulerConfigId=current["ClusterSchedulerConfigId"],
             TargetVersion=current["ClusterSchedulerConfigVersion"], SchedulerConfig=config)
    return str(current["ClusterSchedulerConfigId"])


def create_quota(aws: AwsClients, region: str, request: dict[str, Any]) -> str:
    """CreateComputeQuota; the quota id."""
    return str(call(f"create the compute quota of team {request['ComputeQuotaTarget']['TeamName']}",
                    aws.sagemaker(region).create_compute_quota, **request)["ComputeQuotaId"])


def describe_quota(aws: AwsClients, region: str, quota_id: str) -> dict[str, Any] | None:
    """DescribeComputeQuota, or None when it is gone."""
    try:
        return cast("dict[str, Any]", aws.sagemaker(region).describe_compute_quota(ComputeQuotaId=quota_id))
    except Exception as exc:
        if error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
            return None
        raise translate(exc, f"describe compute quota {quota_id}") from exc


def update_quota(aws: AwsClients, region: str, quota_id: str, request: dict[str, Any]) -> None:
    """UpdateComputeQuota at its current version."""
    sm = aws.sagemaker(region)
    current = call(f"describe compute quota {quota_id}", sm.describe_compute_quota, ComputeQuotaId=quota_id)
    call(f"update compute quota {quota_id}", sm.update_compute_quota, ComputeQuotaId=quota_id,
         TargetVersion=current["ComputeQuotaVersion"], **request)


def delete_quota(aws: AwsClients, region: str, quota_id: str) -> None:
    """DeleteComputeQuota (already gone is success)."""
    try:
        aws.sagemaker(region).delete_compute_quota(ComputeQuotaId=quota_id)
    except Exception as exc:
        if error_code(exc) not in ("ResourceNotFound", "ResourceNotFoundException"):
            raise translate(exc, f"delete compute quota {quota_id}") from exc
