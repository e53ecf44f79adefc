"""Every IAM document builder of manifests/iam_policies.py and iam_feature_policies.py called with one realistic
scope (shared by the IAM walk of tests/security and the role-usage check of tests/iam)."""

from __future__ import annotations

from typing import Any

from instantstart.manifests import iam_feature_policies as feature_pol
from instantstart.manifests import iam_policies as pol

SCOPE = pol.Scope("123456789012", "us-west-2", "alpha", "eks-cluster-alpha", "instantstart-123456789012-x", "vpc-1")
CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123"
ISSUER = "https://oidc.eks.us-west-2.amazonaws.com/id/ABC"
PROVIDER = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"
WORKSPACE_ARN = f"arn:aws:aps:us-west-2:{SCOPE.account}:workspace/ws-1"
TRACKING_SERVER = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/instantstart-alpha"


def every_generated_document() -> dict[str, dict[str, Any]]:
    """Each document builder of the policy module, called with a realistic scope."""
    return {
        "eks_cluster_trust": pol.eks_cluster_trust(SCOPE),
        "execution_trust": pol.execution_trust(SCOPE),
        "autoscaling_trust": pol.autoscaling_trust(SCOPE.account, CLUSTER_ARN),
        "pod_identity_trust": pol.pod_identity_trust(SCOPE.account, SCOPE.eks_cluster, "kube-system", "sa"),
        "execution_inline_policy": pol.execution_inline_policy(SCOPE),
        "csi_data_policy": pol.csi_data_policy(SCOPE),
        "autoscaling_policy": pol.autoscaling_policy(SCOPE.region, CLUSTER_ARN),
        "irsa_trust": pol.irsa_trust(PROVIDER, ISSUER, "ns", "sa", ("sagemaker.amazonaws.com",)),
        "checkpoint_policy": pol.checkpoint_policy(SCOPE.bucket, pol.checkpoint_prefix(SCOPE.cluster_tag)),
        "remote_write_policy": feature_pol.remote_write_policy(WORKSPACE_ARN),
        "fsx_csi_policy": feature_pol.fsx_csi_policy(),
        "mlflow_server_policy": feature_pol.mlflow_server_policy(SCOPE.bucket,
                                                                feature_pol.mlflow_prefix(SCOPE.cluster_tag)),
        "mlflow_writer_policy": feature_pol.mlflow_writer_policy(TRACKING_SERVER),
        "grafana_trust": feature_pol.grafana_trust(WORKSPACE_ARN),
        "grafana_query_policy": feature_pol.grafana_query_policy(WORKSPACE_ARN),
        "lifecycle_guard_policy": pol.lifecycle_guard_policy(),
    }
