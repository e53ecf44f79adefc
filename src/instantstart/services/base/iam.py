"""IAM: least-privilege roles for EKS and the HyperPod execution role, OIDC providers, caller identity."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws import iam as iam_api
from instantstart.aws import identity
from instantstart.aws.clients import AwsClients
from instantstart.errors import Conflict
from instantstart.services.core.installation import installation_id, refuse_foreign
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION, aws_tags, record
from instantstart.store.db import Database

EKS_CLUSTER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
HYPERPOD_INSTANCE_POLICY = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"
OIDC_THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"


def ensure_role(
    aws: AwsClients,
    db: Database,
    *,
    cluster_tag: str,
    operation_id: str | None,
    region: str,
    name: str,
    trust: dict[str, Any],
    managed: list[str],
    inline: dict[str, Any] | None = None,
    description: str = "",
) -> str:
    """A role with exactly the given trust, managed policies and inline policy; returns its ARN. A same-named
    role that is not this cluster's (no matching cluster tag) is refused, never adopted. Without an operation (a
    role ensured while adopting a cluster) its tag names "adopted"."""
    role = iam_api.get_role(aws, region, name)
    if role is not None:
        arn = str(role["Arn"])
        refuse_foreign_role(role, name, cluster_tag, installation_id(db))
        if role.get("AssumeRolePolicyDocument") != trust:
            iam_api.update_trust_policy(aws, region, name, trust)
    else:
        arn = iam_api.create_role(
            aws,
            region,
            name=name,
            trust_policy=json.dumps(trust),
            description=description,
            tags=aws_tags(cluster_tag, operation_id or "adopted", name, installation=installation_id(db)),
        )
        record(
            db,
            cluster_tag=cluster_tag,
            operation_id=operation_id,
            resource_type="iam:role",
            resource_id=name,
            region=region,
            details={"arn": arn},
        )
    attached = iam_api.attached_policies(aws, region, name) if managed else []
    for policy in managed:
        if policy not in attached:
            iam_api.attach_policy(aws, region, name, policy)
    if inline is not None and iam_api.inline_policy(aws, region, name) != inline:
        iam_api.put_inline_policy(aws, region, name, inline)
    return arn


def refuse_foreign_role(role: dict[str, Any], name: str, cluster_tag: str, installation: str) -> None:
    """Raise Conflict when an existing role does not carry this cluster's tag, or carries another
    installation's id (someone else's role)."""
    tags = {t.get("Key"): t.get("Value") for t in role.get("Tags") or []}
    if tags.get(TAG_INSTALLATION) not in (None, installation):
        raise Conflict(
            f"IAM role {name} belongs to another InstantStart installation ({tags.get(TAG_INSTALLATION)}).",
            hint=f"Use another clusterTag, or delete the role {name} from the installation that made it.",
        )
    if tags.get(TAG_CLUSTER) != cluster_tag:
        raise Conflict(
            f"IAM role {name} exists but is not tagged {TAG_CLUSTER}={cluster_tag} "
            f"(found {tags.get(TAG_CLUSTER)!r}); it was not created by InstantStart for this cluster.",
            hint=f"Delete or rename the role {name}, or choose another clusterTag.",
        )


def caller_principal(aws: AwsClients, region: str) -> str:
    """The IAM principal of the control plane: an assumed-role session canonicalised to its role ARN."""
    arn = identity.caller_arn(aws, region)
    if ":assumed-role/" in arn:
        account = arn.split(":")[4]
        role = arn.split(":assumed-role/")[1].split("/")[0]
        return f"arn:aws:iam::{account}:role/{role}"
    return arn


def ensure_oidc_provider(
    aws: AwsClients, db: Database, *, cluster_tag: str, operation_id: str, region: str, issuer: str
) -> str:
    """The IAM OIDC provider of the EKS cluster's issuer (for IRSA); returns its ARN."""
    found = iam_api.oidc_provider_arn(aws, region, issuer)
    if found is not None:
        # One provider per issuer: an existing one (eksctl, another tool) is shared, unless another installation
        # of InstantStart tagged it for another cluster.
        refuse_foreign("IAM OIDC provider", found, iam_api.oidc_provider_tags(aws, region, found), cluster_tag,
                       installation_id(db))
        return found
    arn = iam_api.create_oidc_provider(
        aws,
        region,
        issuer=issuer,
        thumbprint=OIDC_THUMBPRINT,
        tags=aws_tags(cluster_tag, operation_id, installation=installation_id(db)),
    )
    record(
        db,
        cluster_tag=cluster_tag,
        operation_id=operation_id,
        resource_type="iam:oidc-provider",
        resource_id=arn,
        region=region,
    )
    return arn
