"""Workload IAM roles (the features' service accounts, MLflow's): Pod Identity or IRSA trust, managed and inline
policies, associations, and the IRSA chain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.aws import iam as iam_api
from instantstart.aws import identity as sts_api
from instantstart.aws.clients import AwsClients
from instantstart.errors import DependencyFailed, InstantStartError
from instantstart.manifests import iam_policies as pol
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import aws_tags, mark_gone, record, tag_map
from instantstart.store.db import Database


@dataclass(frozen=True)
class Identity:
    """An IAM role for a feature's service account: EKS Pod Identity, or IRSA (trust on the cluster's OIDC
    provider for exactly namespace/serviceAccount), with managed policies and/or an inline policy."""

    namespace: str
    service_account: str
    role: str  # suffix: instantstart-<tag>-<role>
    managed_policies: tuple[str, ...] = ()
    irsa: bool = False
    trust_services: tuple[str, ...] = ()  # extra service principals in the trust (IRSA roles)


AUDIENCE = pol.IRSA_AUDIENCE
ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class Where:
    """The cluster a feature acts on, and who acts (ledger rows and tags name both)."""

    db: Database
    aws: AwsClients
    tag: str
    region: str
    eks_cluster: str
    operation_id: str

    def role_name(self, suffix: str) -> str:
        """instantstart-<tag>-<suffix>."""
        return f"instantstart-{self.tag}-{suffix}"


def ensure_role(where: Where, name: str, trust: dict[str, Any], managed: tuple[str, ...],
                inline: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The role with exactly this trust, these managed policies and this inline policy; created (ledgered
    before the call, tagged) when absent. Its ARN and the links it had to write (empty: unchanged)."""
    wrote: list[str] = []
    role = iam_api.get_role(where.aws, where.region, name)
    if role is None:
        record(where.db, cluster_tag=where.tag, operation_id=where.operation_id, resource_type="iam:role",
               resource_id=name, region=where.region)
        arn = iam_api.create_role(
            where.aws, where.region, name=name, trust_policy=json.dumps(trust),
            description=f"InstantStart feature role (cluster {where.tag})",
            tags=aws_tags(where.tag, where.operation_id, name, installation=installation_id(where.db)),
        )
        wrote.append("role")
    else:
        arn = str(role["Arn"])
        if role.get("AssumeRolePolicyDocument") != trust:
            try:
                iam_api.update_trust_policy(where.aws, where.region, name, trust)
            except InstantStartError as exc:
                raise DependencyFailed(
                    f"The trust policy of IAM role {name} could not be written: {exc.message}",
                    hint=exc.hint or "Allow iam:UpdateAssumeRolePolicy on instantstart-* roles for the control "
                    "plane's identity, then operation_retry.",
                    retryable=exc.retryable,
                ) from exc
            wrote.append("trust")
    attached = iam_api.attached_policies(where.aws, where.region, name)
    for policy in managed:
        if policy not in attached:
            iam_api.attach_policy(where.aws, where.region, name, policy)
            wrote.append("managedPolicy")
    if inline is not None and iam_api.inline_policy(where.aws, where.region, name) != inline:
        iam_api.put_inline_policy(where.aws, where.region, name, inline)
        wrote.append("policy")
    return arn, wrote


def remove_role(where: Where, name: str) -> bool:
    """Delete the role with its policies (gone already: False)."""
    gone = iam_api.delete_role_if_present(where.aws, where.region, name)
    mark_gone(where.db, resource_type="iam:role", resource_id=name, region=where.region)
    return gone


def ensure_association(where: Where, ident: Identity, role_arn: str) -> str:
    """The pod identity association of ident's service account pointing at role_arn: 'created',
    'updated' or 'unchanged'."""
    found = eks_api.find_pod_identity_association(
        where.aws, where.region, where.eks_cluster, ident.namespace, ident.service_account
    )
    if found is not None:
        if found[1] == role_arn:
            return "unchanged"
        eks_api.set_pod_identity_role(where.aws, where.region, where.eks_cluster, found[0], role_arn)
        return "updated"
    aid = eks_api.create_pod_identity_association(
        where.aws, where.region, cluster=where.eks_cluster, namespace=ident.namespace,
        service_account=ident.service_account, role_arn=role_arn,
        tags=tag_map(where.tag, where.operation_id, installation_id(where.db)),
    )
    record(where.db, cluster_tag=where.tag, operation_id=where.operation_id,
           resource_type="eks:pod-identity-association", resource_id=aid, region=where.region,
           details={"clusterName": where.eks_cluster, "namespace": ident.namespace,
                    "serviceAccount": ident.service_account})
    return "created"


def remove_association(where: Where, ident: Identity) -> bool:
    """Delete the service account's pod identity association (none: False)."""
    found = eks_api.find_pod_identity_association(
        where.aws, where.region, where.eks_cluster, ident.namespace, ident.service_account
    )
    if found is None:
        return False
    eks_api.delete_pod_identity_association(where.aws, where.region, where.eks_cluster, found[0])
    mark_gone(where.db, resource_type="eks:pod-identity-association", resource_id=found[0], region=where.region)
    return True


def ensure_identity(where: Where, ident: Identity, inline: dict[str, Any] | None,
                    oidc: tuple[str, str] | None = None) -> tuple[str, list[str]]:
    """A feature's role (and, for Pod Identity, its association); its ARN and what was written.
    `oidc` = (provider ARN, issuer) for IRSA roles."""
    if ident.irsa:
        if oidc is None:
            raise DependencyFailed(
                f"The role for {ident.namespace}/{ident.service_account} needs the cluster's IAM OIDC provider.",
                hint="Re-run the EKS stage (operation_retry) so it registers the OIDC provider.",
            )
        trust = pol.irsa_trust(oidc[0], oidc[1], ident.namespace, ident.service_account, ident.trust_services)
    else:
        trust = pol.pod_identity_trust(
            sts_api.account_id(where.aws, where.region), where.eks_cluster, ident.namespace, ident.service_account
        )
    arn, wrote = ensure_role(where, where.role_name(ident.role), trust, ident.managed_policies, inline)
    if not ident.irsa and ensure_association(where, ident, arn) != "unchanged":
        wrote.append("association")
    return arn, wrote


def remove_identity(where: Where, ident: Identity) -> list[str]:
    """Remove a feature's association and role; what was removed."""
    removed = []
    if not ident.irsa and remove_association(where, ident):
        removed.append("association")
    if remove_role(where, where.role_name(ident.role)):
        removed.append("role")
    return removed


def identity_state(where: Where, ident: Identity) -> dict[str, Any]:
    """What exists of a feature's identity right now: role ARN, policies, association."""
    role = iam_api.get_role(where.aws, where.region, where.role_name(ident.role))
    state: dict[str, Any] = {"role": where.role_name(ident.role), "roleArn": role["Arn"] if role else None}
    if role is not None:
        attached = iam_api.attached_policies(where.aws, where.region, where.role_name(ident.role))
        state["managedPolicies"] = sorted(attached)
    if not ident.irsa:
        found = eks_api.find_pod_identity_association(
            where.aws, where.region, where.eks_cluster, ident.namespace, ident.service_account
        )
        state["association"] = {"id": found[0], "roleArn": found[1]} if found else None
    return state
