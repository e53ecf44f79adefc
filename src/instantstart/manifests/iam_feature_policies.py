"""The IAM documents of the optional features: observability's collector, the FSx CSI driver, MLflow, Grafana."""

from __future__ import annotations

from typing import Any

# The policy module's building blocks: every identity policy ends with the same lifecycle Deny.
from instantstart.manifests.iam_policies import DATA_ROOT, _policy, _prefix_statements, lifecycle_deny, service_trust


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """The collector's permissions as the HyperPod observability docs list them: aps:RemoteWrite on exactly
    this workspace, and CloudWatch Logs on the /aws/sagemaker/Clusters/* log groups of the same account and
    Region (read from the workspace ARN)."""
    partition, region, account = workspace_arn.split(":")[1], workspace_arn.split(":")[3], workspace_arn.split(":")[4]
    groups = f"arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RemoteWrite", "Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": [workspace_arn]},
            {
                "Sid": "ClusterLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups",
                           "logs:DescribeLogStreams", "logs:PutLogEvents", "logs:GetLogEvents",
                           "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery", "logs:StopQuery",
                           "logs:GetQueryResults"],
                "Resource": [groups, f"{groups}:log-stream:*"],
            },
            lifecycle_deny(),
        ],
    }


def fsx_csi_policy() -> dict[str, Any]:
    """What the FSx for Lustre CSI driver's controller needs for the static volumes InstantStart makes (a PV naming
    an existing file system): describe only. Dynamic provisioning (create, update, delete from a StorageClass) is
    not offered, so the role cannot delete or change any file system in the account (issue 26 item 4)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "FsxDescribe", "Effect": "Allow", "Action": ["fsx:DescribeFileSystems"],
                       "Resource": ["*"]}, lifecycle_deny()],
    }


def mlflow_prefix(cluster_tag: str) -> str:
    """The cluster's MLflow artifact store prefix in the project bucket."""
    return f"{DATA_ROOT}{cluster_tag}/mlflow/"


def mlflow_server_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """The role SageMaker's MLflow tracking server assumes: its artifact store (the prefix) only."""
    return _policy(*_prefix_statements("Artifact", bucket, prefix, ["s3:ListBucket", "s3:GetBucketLocation"]))


def mlflow_writer_policy(tracking_server_arn: str) -> dict[str, Any]:
    """Training pods (through their service account's role): the MLflow API of this one tracking server only."""
    return _policy(
        {
            "Sid": "MlflowThisTrackingServer",
            "Effect": "Allow",
            "Action": ["sagemaker-mlflow:*"],
            "Resource": [tracking_server_arn],
        },
        {
            "Sid": "DescribeThisTrackingServer",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeMlflowTrackingServer"],
            "Resource": [tracking_server_arn],
        },
    )


def grafana_trust(amp_workspace_arn: str) -> dict[str, Any]:
    """Trust of an Amazon Managed Grafana workspace's role: grafana.amazonaws.com, only for this account's
    workspaces (account and Region read from the AMP workspace ARN the role reads)."""
    partition, region, account = amp_workspace_arn.split(":")[1], amp_workspace_arn.split(":")[3], \
        amp_workspace_arn.split(":")[4]
    return service_trust("grafana.amazonaws.com", account, f"arn:{partition}:grafana:{region}:{account}:/workspaces/*")


def grafana_query_policy(amp_workspace_arn: str) -> dict[str, Any]:
    """What a Grafana workspace needs to use the cluster's AMP workspace as a Prometheus data source: the query
    actions of the AWS managed AmazonPrometheusQueryAccess policy on exactly this workspace, and listing and
    describing workspaces (Grafana's data-source discovery, which IAM cannot scope to one workspace)."""
    return _policy(
        {"Sid": "PromQL", "Effect": "Allow", "Resource": [amp_workspace_arn],
         "Action": ["aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics"]},
        {"Sid": "Workspaces", "Effect": "Allow", "Resource": ["*"],
         "Action": ["aps:DescribeWorkspace", "aps:ListWorkspaces"]},
    )
