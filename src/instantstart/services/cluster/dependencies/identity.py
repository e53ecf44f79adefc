"""EKS Pod Identity for add-ons: the role (trust pods.eks.amazonaws.com) and the association, ensured."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from instantstart.aws.errors import error_code, translate
from instantstart.services.core.ledger import aws_tags, record, tag_map
from instantstart.store.db import Database


@dataclass(frozen=True)
class Owner:
    """Whose resources these are: tags and ledger rows name the cluster tag and the operation."""

    db: Database
    cluster_tag: str
    operation_id: str | None
    region: str


def pod_identity_trust() -> dict[str, Any]:
    """Trust policy of a role assumed through EKS Pod Identity."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }


def project_bucket_policy(bucket: str) -> dict[str, Any]:
    """Mountpoint for S3's recommended permissions, limited to the project bucket."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "MountpointListProjectBucket",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
            },
            {
                "Sid": "MountpointObjectsInProjectBucket",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
                "Resource": [f"arn:aws:s3:::{bucket}/*"],
            },
        ],
    }


def ensure_pod_identity_role(iam: Any, owner: Owner, name: str, policy: dict[str, Any]) -> str:
    """A role EKS Pod Identity can assume, with exactly `policy` inline; created (tagged, ledgered) if absent."""
    trust = pod_identity_trust()
    try:
        try:
            role = iam.get_role(RoleName=name)["Role"]
            current = role.get("AssumeRolePolicyDocument")
            if isinstance(current, str):
                current = json.loads(current)
            if current != trust:
                iam.update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(trust))
        except Exception as exc:
            if error_code(exc) != "NoSuchEntity":
                raise
            role = iam.create_role(
                RoleName=name,
                AssumeRolePolicyDocument=json.dumps(trust),
                Description=f"Pod Identity role of an InstantStart add-on (cluster {owner.cluster_tag})",
                Tags=aws_tags(owner.cluster_tag, owner.operation_id or "adopted", name),
            )["Role"]
            record(
                owner.db,
                cluster_tag=owner.cluster_tag,
                operation_id=owner.operation_id,
                resource_type="iam:role",
                resource_id=name,
                region=owner.region,
                details={"arn": role["Arn"]},
            )
        try:
            existing = iam.get_role_policy(RoleName=name, PolicyName="instantstart")["PolicyDocument"]
            if isinstance(existing, str):
                existing = json.loads(existing)
        except Exception as exc:
            if error_code(exc) != "NoSuchEntity":
                raise
            existing = None
        if existing != policy:
            iam.put_role_policy(RoleName=name, PolicyName="instantstart", PolicyDocument=json.dumps(policy))
        return str(role["Arn"])
    except Exception as exc:
        raise translate(exc, f"ensure IAM role {name}") from exc


def ensure_pod_identity_association(
    eks: Any, owner: Owner, *, cluster: str, namespace: str, service_account: str, role_arn: str
) -> str:
    """The pod identity association of namespace/serviceAccount, pointing at `role_arn`; its id."""
    try:
        found = eks.list_pod_identity_associations(
            clusterName=cluster, namespace=namespace, serviceAccount=service_account
        ).get("associations", [])
        if found:
            aid = str(found[0]["associationId"])
            current = eks.describe_pod_identity_association(clusterName=cluster, associationId=aid)
            if current["association"].get("roleArn") != role_arn:
                eks.update_pod_identity_association(clusterName=cluster, associationId=aid, roleArn=role_arn)
            return aid
        created = eks.create_pod_identity_association(
            clusterName=cluster,
            namespace=namespace,
            serviceAccount=service_account,
            roleArn=role_arn,
            tags=tag_map(owner.cluster_tag, owner.operation_id or "adopted"),
        )["association"]
    except Exception as exc:
        raise translate(exc, f"ensure the pod identity association for {namespace}/{service_account}") from exc
    aid = str(created["associationId"])
    record(
        owner.db,
        cluster_tag=owner.cluster_tag,
        operation_id=owner.operation_id,
        resource_type="eks:pod-identity-association",
        resource_id=aid,
        region=owner.region,
        details={"clusterName": cluster, "namespace": namespace, "serviceAccount": service_account},
    )
    return aid
