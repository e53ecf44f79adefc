"""Authorization by EKS access policies: what an access entry's policies let its principal do.

EKS evaluates access policies (cluster or namespace scope) beside RBAC. The twin models the
policies and `system:masters`; a principal whose entry names other Kubernetes groups is trusted as
if RBAC bound them (RBAC objects are stored, not evaluated). An identity without grant information
(a standalone server, or a cluster before its access entries are known) is unrestricted.
"""

from __future__ import annotations

from dataclasses import dataclass

READ_VERBS = {"get", "list", "watch"}
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Grant:
    """One associated access policy: its short name and, for namespace scope, the namespaces."""

    policy: str  # e.g. AmazonEKSClusterAdminPolicy
    namespaces: tuple[str, ...] = ()  # empty: cluster scope


@dataclass(frozen=True)
class Attributes:
    """What a request does, as Kubernetes authorizers see it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def _policy_allows(policy: str, attrs: Attributes) -> bool:
    read = attrs.verb in READ_VERBS
    if policy == "AmazonEKSClusterAdminPolicy":
        return True
    if policy == "AmazonEKSAdminPolicy":
        return not (attrs.group == RBAC_GROUP and attrs.resource.startswith("cluster") and not read)
    if policy == "AmazonEKSEditPolicy":
        if attrs.group == RBAC_GROUP or attrs.resource in ("resourcequotas", "limitranges", "namespaces"):
            return read and attrs.group != RBAC_GROUP
        return True
    if policy == "AmazonEKSAdminViewPolicy":
        return read
    # AmazonEKSViewPolicy, and any policy the twin does not model in detail: read, but not secrets.
    return read and attrs.resource != "secrets"


def allowed(groups: tuple[str, ...], grants: tuple[Grant, ...] | None, attrs: Attributes) -> bool:
    """Whether an identity with these groups and access-policy grants may do `attrs`."""
    if grants is None or "system:masters" in groups:
        return True
    if any(g not in ("system:authenticated",) for g in groups):
        return True  # RBAC-bound groups: not evaluated, trusted
    for grant in grants:
        if grant.namespaces and attrs.namespace not in grant.namespaces:
            continue
        if _policy_allows(grant.policy, attrs):
            return True
    return False


def forbidden_message(username: str, attrs: Attributes) -> str:
    """kube-apiserver's wording of a denial."""
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    what = f'{attrs.resource} "{attrs.name}"' if attrs.name else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'{what} is forbidden: User "{username}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.group}" {where}'
    )
