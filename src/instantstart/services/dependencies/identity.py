"""EKS Pod Identity for add-ons: the role (trust pods.eks.amazonaws.com) and the association, ensured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.aws.clients import AwsClients
from instantstart.services.base.iam import ensure_role
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import record, tag_map
from instantstart.store.db import Database


@dataclass(frozen=True)
class Owner:
    """Whose resources these are: tags and ledger rows name the cluster tag and the operation."""

    db: Database
    cluster_tag: str
    operation_id: str | None
    region: str


def ensure_pod_identity_role(
    aws: AwsClients, owner: Owner, name: str, trust: dict[str, Any], policy: dict[str, Any]
) -> str:
    """A role EKS Pod Identity can assume (`trust`), with exactly `policy` inline; created (tagged, ledgered) if
    absent; a same-named role of someone else is refused."""
    return ensure_role(
        aws,
        owner.db,
        cluster_tag=owner.cluster_tag,
        operation_id=owner.operation_id,
        region=owner.region,
        name=name,
        trust=trust,
        managed=[],
        inline=policy,
        description=f"Pod Identity role of an InstantStart add-on (cluster {owner.cluster_tag})",
    )


def ensure_pod_identity_association(
    aws: AwsClients, owner: Owner, *, cluster: str, namespace: str, service_account: str, role_arn: str
) -> str:
    """The pod identity association of namespace/serviceAccount, pointing at `role_arn`; its id."""
    region = owner.region
    found = eks_api.find_pod_identity_association(aws, region, cluster, namespace, service_account)
    if found is not None:
        aid, current_role = found
        if current_role != role_arn:
            eks_api.set_pod_identity_role(aws, region, cluster, aid, role_arn)
        return aid
    aid = eks_api.create_pod_identity_association(
        aws,
        region,
        cluster=cluster,
        namespace=namespace,
        service_account=service_account,
        role_arn=role_arn,
        tags=tag_map(owner.cluster_tag, owner.operation_id or "adopted", installation_id(owner.db)),
    )
    record(
        owner.db,
        cluster_tag=owner.cluster_tag,
        operation_id=owner.operation_id,
        resource_type="eks:pod-identity-association",
        resource_id=aid,
        region=region,
        details={"clusterName": cluster, "namespace": namespace, "serviceAccount": service_account},
    )
    return aid
