"""The policies the control plane writes for the roles it creates, against what the roles' principals did on the
twin (nodes, the S3 CSI driver, HyperPod autoscaling, ...): hyperpod_twin/role_usage.py records each request a
principal made with a role's credentials in `<call log>.roles`; this module reads it back and checks each role's
policy builder in both directions.

(a) always: every action a principal was refused is granted by its role's builder for some resource (a refusal of
    an action the builder grants is resource scoping at work: a test probing it, e.g. a pod writing outside its
    prefix); (b) when the whole suite ran and passed: every action the builder grants was used with an Allow, or is
    in NOT_SIMULATED (behaviour of AWS-managed software the twin does not run, each with its reason and source).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from instantstart.services.account.policy import granted_actions
from tests.support.iam_documents import every_generated_document

# Which builder wrote the inline policy of a role the control plane creates, by the role's name
# (instantstart-<tag>-<suffix>; see services/cluster/eks_stage.py, dependencies.yaml, features/specs.py).
ROLE_BUILDERS = {
    "hyperpod": "execution_inline_policy",
    "s3-csi": "csi_data_policy",
    "hp-autoscaling": "autoscaling_policy",
    "checkpointing": "checkpoint_policy",
    "observability": "remote_write_policy",
    "fsx-csi": "fsx_csi_policy",
    "mlflow-server": "mlflow_server_policy",
    "mlflow-writer": "mlflow_writer_policy",
    "grafana": "grafana_query_policy",
}
_ROLE_NAME = re.compile(r"^instantstart-.+-(" + "|".join(sorted(map(re.escape, ROLE_BUILDERS), key=len,
                                                                    reverse=True)) + r")$")


@dataclass(frozen=True)
class NotSimulated:
    """Actions a builder grants for behaviour the twin does not simulate: why they are needed, and where AWS
    documents it."""

    actions: tuple[str, ...]
    reason: str
    source: str


MOUNTPOINT_DOC = "https://github.com/awslabs/mountpoint-s3/blob/main/doc/CONFIGURATION.md#iam-permissions"
NOT_SIMULATED: dict[str, tuple[NotSimulated, ...]] = {
    "execution_inline_policy": (
        NotSimulated(
            ("ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
             "ec2:DeleteNetworkInterface", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
             "ec2:UnassignPrivateIpAddresses", "ec2:CreateTags", "ec2:DescribeInstances", "ec2:DescribeTags",
             "ec2:DescribeNetworkInterfaces", "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets"),
            "the Amazon VPC CNI's ipamd on each node manages the node's ENIs and secondary IPs for pods with the "
            "node's role (HyperPod requires the VPC CNI); the twin gives pods IPs without modelling ENIs",
            "https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html and "
            "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html",
        ),
        NotSimulated(
            ("s3:DeleteObject", "s3:AbortMultipartUpload"),
            "Mountpoint signing as the node (no Pod Identity association for the S3 CSI driver) deletes a file a "
            "pod removes (the PVs mount with allow-delete) and aborts a failed multipart upload; the twin's pods "
            "only create files, each in one PutObject",
            MOUNTPOINT_DOC,
        ),
    ),
    "csi_data_policy": (
        NotSimulated(
            ("s3:DeleteObject", "s3:AbortMultipartUpload"),
            "Mountpoint deletes a file a pod removes (the PVs mount with allow-delete) and aborts a failed "
            "multipart upload; the twin's pods only create files, each in one PutObject",
            MOUNTPOINT_DOC,
        ),
    ),
    "checkpoint_policy": (
        NotSimulated(
            ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListBucket",
             "cloudwatch:PutMetricData"),
            "the managed tiered checkpointing library inside the training container (IRSA on this role) writes "
            "checkpoints to the cluster's checkpoint prefix, lists and reads them to restore, deletes old ones and "
            "publishes its metrics; the twin runs no training code, so nothing uses this role on the twin",
            "https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html",
        ),
    ),
    "remote_write_policy": (
        NotSimulated(
            ("logs:CreateLogGroup", "logs:DescribeLogGroups", "logs:DescribeLogStreams", "logs:GetLogEvents",
             "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery", "logs:StopQuery",
             "logs:GetQueryResults"),
            "listed for the observability add-on's role by the HyperPod observability setup (log group creation "
            "and the read side of its CloudWatch Logs integration); the twin's collector only writes its stream "
            "(CreateLogStream, PutLogEvents) and its remote write: which add-on component reads is not modelled",
            "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-cluster-observability-cluster.html",
        ),
    ),
    "fsx_csi_policy": (
        NotSimulated(
            ("fsx:DescribeFileSystems",),
            "the FSx for Lustre CSI controller describes the file system a static PV names when it publishes the "
            "volume; the twin's CSI stand-in mounts static PVs without calling FSx",
            "https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/docs/install.md",
        ),
    ),
    "autoscaling_policy": (
        NotSimulated(
            ("kms:CreateGrant", "kms:DescribeKey"),
            "HyperPod grants the new nodes' EBS volumes use of a customer-managed KMS key when an instance group "
            "encrypts its volumes with one; the twin has no KMS",
            "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html",
        ),
    ),
    "mlflow_server_policy": (
        NotSimulated(
            ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListBucket",
             "s3:GetBucketLocation"),
            "SageMaker's managed MLflow tracking server assumes this role to read and write run artifacts in its "
            "artifact store (the cluster's mlflow/ prefix); the twin's mlflow server keeps artifacts on local disk",
            "https://docs.aws.amazon.com/sagemaker/latest/dg/mlflow-create-tracking-server-iam.html",
        ),
    ),
    "grafana_query_policy": (
        NotSimulated(
            ("aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata", "aps:ListWorkspaces",
             "aps:DescribeWorkspace"),
            "Amazon Managed Grafana assumes the workspace role to discover AMP workspaces and run the Prometheus data "
            "source's queries; the twin serves the Grafana API but runs no Grafana server",
            "https://docs.aws.amazon.com/grafana/latest/userguide/AMG-manage-permissions.html",
        ),
    ),
}


@dataclass(frozen=True)
class Use:
    """One request a principal made with a role's credentials (a line of the role-usage log)."""

    role: str
    action: str
    resource: str
    decision: str

    @property
    def builder(self) -> str | None:
        """The builder of the role's inline policy (None: a role the control plane makes no policy for)."""
        found = _ROLE_NAME.match(self.role)
        return ROLE_BUILDERS[found.group(1)] if found else None


def role_log(call_log: Path) -> Path:
    """The role-usage log next to a session's call log (hyperpod_twin.role_usage writes it)."""
    return Path(f"{call_log}.roles")


def recorded_uses(log: Path) -> set[Use]:
    """Every distinct use of a role recorded in the log."""
    if not log.exists():
        return set()
    uses = set()
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:
            uses.add(Use(*parts[:4]))
    return uses


def builder_grants() -> dict[str, set[str]]:
    """The actions each role policy builder grants."""
    documents = every_generated_document()
    return {builder: set(granted_actions(documents[builder])) for builder in ROLE_BUILDERS.values()}


def role_findings(uses: set[Use], grants: dict[str, set[str]], complete: bool) -> list[str]:
    """What is wrong between what the roles' principals did and their builders' grants (empty: nothing)."""
    findings = []
    used: dict[str, set[str]] = {builder: set() for builder in grants}
    for use in sorted(uses, key=lambda u: (u.role, u.action, u.resource)):
        if use.builder is None or use.builder not in grants:
            continue
        if use.decision == "Allow":
            used[use.builder].add(use.action)
        elif use.action not in grants[use.builder]:
            findings.append(f"{use.builder}: {use.role} needed {use.action} on {use.resource} and was refused "
                            f"({use.decision}); the builder does not grant it")
    if not complete:
        return findings
    for builder, granted in sorted(grants.items()):
        exempt = {a for entry in NOT_SIMULATED.get(builder, ()) for a in entry.actions}
        # A wildcard grant (sagemaker-mlflow:* on one tracking server) counts as used when a use matched it.
        matched = {g for g in granted if any(fnmatch.fnmatchcase(a, g) for a in used[builder])}
        unused = sorted(granted - used[builder] - matched - exempt)
        if unused:
            findings.append(f"{builder} grants actions no principal used in the suite and NOT_SIMULATED does not "
                            f"explain: {unused}")
        stale = sorted((exempt & used[builder]) | (exempt - granted))
        if stale:
            findings.append(f"NOT_SIMULATED[{builder}] lists actions the twin now exercises or the builder no "
                            f"longer grants: {stale}")
    return findings
