"""Managed tiered checkpointing: the cluster's TieredStorageConfig and the IRSA chain its pods use."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.aws import hyperpod as hp_api
from instantstart.aws import iam as iam_api
from instantstart.errors import DependencyFailed, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_call
from instantstart.kube.gateway import Api, api_status
from instantstart.kube.wire import Obj
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.labels import LABEL_MANAGED, MANAGED_LABELS, MANAGER
from instantstart.services.base.workload_identity import (
    AUDIENCE,
    ROLE_ANNOTATION,
    Where,
    ensure_role,
    remove_role,
)
from instantstart.services.capacity.group_allowlist import resubmit_spec
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import aws_tags, record

NAMESPACE = "default"
SERVICE_ACCOUNT = "hyperpod-checkpointing"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ROLE = "checkpointing"
THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"


@dataclass(frozen=True)
class Subject:
    """The Kubernetes service account checkpointing pods run as (the role trusts exactly this one)."""

    namespace: str = NAMESPACE
    service_account: str = SERVICE_ACCOUNT

    @property
    def name(self) -> str:
        """system:serviceaccount:<namespace>:<serviceAccount>."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def to_dict(self) -> dict[str, str]:
        """The wire form recorded on the cluster row and shown back."""
        return {"namespace": self.namespace, "serviceAccount": self.service_account}


def subject_of(recorded: dict[str, Any] | None) -> Subject:
    """The subject the last enable recorded (the cluster facts' `checkpointing`; the defaults when none was)."""
    found = recorded or {}
    return Subject(str(found.get("namespace") or NAMESPACE), str(found.get("serviceAccount") or SERVICE_ACCOUNT))


def checkpoint_policy(bucket: str, cluster_tag: str) -> dict[str, Any]:
    """S3 read/write on this cluster's checkpoint prefix of the project bucket only, plus CloudWatch metrics."""
    return pol.checkpoint_policy(bucket, pol.checkpoint_prefix(cluster_tag))


def desired_config(enabled: bool, mode: str, percentage: int | None) -> dict[str, Any]:
    """The TieredStorageConfig a request asks for."""
    if not enabled:
        return {"Mode": "Disable"}
    if mode == "custom" and percentage is not None:
        return {"Mode": "Enable", "InstanceMemoryAllocationPercentage": percentage}
    return {"Mode": "Enable"}


def config_matches(actual: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    """Whether the described config already is the desired one (absent counts as Disable)."""
    current = actual or {"Mode": "Disable"}
    if current.get("Mode") != desired["Mode"]:
        return False
    return "InstanceMemoryAllocationPercentage" not in desired or current.get(
        "InstanceMemoryAllocationPercentage"
    ) == desired["InstanceMemoryAllocationPercentage"]


def update_config(where: Where, cluster: dict[str, Any], config: dict[str, Any]) -> None:
    """UpdateCluster with TieredStorageConfig, every instance group resubmitted through the field allowlist."""
    groups = [resubmit_spec(g) for g in cluster.get("InstanceGroups") or []]
    request: dict[str, Any] = {"ClusterName": cluster["ClusterName"], "TieredStorageConfig": copy.deepcopy(config)}
    if groups:
        request["InstanceGroups"] = groups
    hp_api.update_cluster(where.aws, where.region, f"set TieredStorageConfig {config['Mode']}", **request)


def issuer_of(where: Where) -> str:
    """The EKS cluster's OIDC issuer URL."""
    cluster = eks_api.describe_cluster(where.aws, where.region, where.eks_cluster) or {}
    issuer = ((cluster.get("identity") or {}).get("oidc") or {}).get("issuer")
    if not issuer:
        raise PreconditionFailed(
            f"EKS cluster {where.eks_cluster} reports no OIDC issuer.", hint="Wait for the EKS cluster to be ACTIVE."
        )
    return str(issuer)


def ensure_provider(where: Where, issuer: str) -> tuple[str, bool]:
    """The IAM OIDC provider of the issuer (registered, ledgered, when missing); (ARN, created)."""
    arn = iam_api.oidc_provider_arn(where.aws, where.region, issuer)
    if arn is not None:
        return arn, False
    arn = iam_api.create_oidc_provider(
        where.aws, where.region, issuer=issuer, thumbprint=THUMBPRINT,
        tags=aws_tags(where.tag, where.operation_id, installation=installation_id(where.db)),
    )
    record(where.db, cluster_tag=where.tag, operation_id=where.operation_id, resource_type="iam:oidc-provider",
           resource_id=arn, region=where.region)
    return arn, True


def read_sa(api: Api, who: Subject) -> Obj | None:
    """The checkpointing ServiceAccount, or None."""
    try:
        return core_kinds.read_service_account(api, who.service_account, who.namespace)
    except Exception as exc:
        if api_status(exc) == 404:
            return None
        raise


def namespace_exists(api: Api, namespace: str) -> bool:
    """Whether the namespace exists."""
    try:
        core_kinds.read_namespace(api, namespace)
    except Exception as exc:
        if api_status(exc) == 404:
            return False
        raise
    return True


def ensure_annotation(api: Api, who: Subject, role_arn: str) -> str | None:
    """The ServiceAccount exists and carries the role annotation; what was written (None: unchanged)."""
    sa = kube_call("read the checkpointing service account", read_sa, api, who)
    if sa is None:
        if not kube_call("read the checkpointing namespace", namespace_exists, api, who.namespace):
            raise PreconditionFailed(
                f"tieredStorage.namespace: namespace {who.namespace} does not exist on the cluster.",
                hint=f"Create it (kubectl create namespace {who.namespace}) or pass an existing namespace "
                "(default: default), then operation_retry.",
                details={"fields": [{"field": "tieredStorage.namespace", "message": "no such namespace"}]},
            )
        body = {"metadata": {"name": who.service_account, "namespace": who.namespace,
                             "labels": dict(MANAGED_LABELS), "annotations": {ROLE_ANNOTATION: role_arn}}}
        kube_call("create the checkpointing service account", core_kinds.create_service_account, api,
                  who.namespace, body)
        return "serviceAccount"
    if wire.annotations(sa).get(ROLE_ANNOTATION) == role_arn:
        return None
    patch = {"metadata": {"annotations": {ROLE_ANNOTATION: role_arn}}}
    kube_call("annotate the checkpointing service account", core_kinds.patch_service_account, api,
              who.service_account, who.namespace, patch)
    return "annotation"


def remove_annotation(api: Api, who: Subject) -> str | None:
    """Remove the annotation (and the ServiceAccount when InstantStart created it); what was removed."""
    sa = kube_call("read the checkpointing service account", read_sa, api, who)
    if sa is None:
        return None
    if wire.labels(sa).get(LABEL_MANAGED) == MANAGER:
        kube_call("delete the checkpointing service account", core_kinds.delete_service_account, api,
                  who.service_account, who.namespace)
        return "serviceAccount"
    if ROLE_ANNOTATION not in wire.annotations(sa):
        return None
    patch = {"metadata": {"annotations": {ROLE_ANNOTATION: None}}}
    kube_call("remove the role annotation", core_kinds.patch_service_account, api, who.service_account,
              who.namespace, patch)
    return "annotation"


def enable(where: Where, api: Api, cluster: dict[str, Any], bucket: str,
           config: dict[str, Any], who: Subject, before: Subject) -> list[str]:
    """Every link of the chain and the cluster config, each written only when it differs; what was written.
    When the subject moved (`before` differs), the old service account loses the annotation."""
    wrote: list[str] = []
    issuer = issuer_of(where)
    provider, created = ensure_provider(where, issuer)
    if created:
        wrote.append("oidcProvider")
    trust = pol.irsa_trust(provider, issuer, who.namespace, who.service_account)
    role_arn, role_wrote = ensure_role(where, where.role_name(ROLE), trust, (), checkpoint_policy(bucket, where.tag))
    wrote += role_wrote
    sa_wrote = ensure_annotation(api, who, role_arn)
    if sa_wrote:
        wrote.append(sa_wrote)
    if before != who and remove_annotation(api, before):
        wrote.append("previousServiceAccount")
    if not config_matches(cluster.get("TieredStorageConfig"), config):
        update_config(where, cluster, config)
        wrote.append("clusterConfig")
    return wrote


def disable(where: Where, api: Api, cluster: dict[str, Any], who: Subject) -> list[str]:
    """Annotation (or our ServiceAccount), role and policy removed; TieredStorageConfig Mode Disable."""
    removed = []
    sa_removed = remove_annotation(api, who)
    if sa_removed:
        removed.append(sa_removed)
    if remove_role(where, where.role_name(ROLE)):
        removed += ["role", "policy"]
    if not config_matches(cluster.get("TieredStorageConfig"), {"Mode": "Disable"}):
        update_config(where, cluster, {"Mode": "Disable"})
        removed.append("clusterConfig")
    return removed


def chain(where: Where, api: Api, cluster: dict[str, Any] | None, bucket: str | None,
          who: Subject) -> dict[str, Any]:
    """The feature's actual state: TieredStorageConfig and every IRSA link with ok/broken and why."""
    links: list[dict[str, Any]] = []

    def link(name: str, ok: bool, why: str) -> None:
        links.append({"link": name, "ok": ok, "why": why})

    config = (cluster or {}).get("TieredStorageConfig") or {"Mode": "Disable"}
    link("clusterConfig", config.get("Mode") == "Enable", f"TieredStorageConfig Mode {config.get('Mode')}")
    issuer = issuer_of(where)
    provider = iam_api.oidc_provider_arn(where.aws, where.region, issuer)
    link("oidcProvider", provider is not None,
         f"IAM OIDC provider {provider}" if provider else f"no IAM OIDC provider for {issuer}")
    name = where.role_name(ROLE)
    role = iam_api.get_role(where.aws, where.region, name)
    link("role", role is not None, f"IAM role {name} exists" if role else f"IAM role {name} does not exist")
    if role is not None and provider is not None:
        wanted = pol.irsa_trust(provider, issuer, who.namespace, who.service_account)
        ok = role.get("AssumeRolePolicyDocument") == wanted
        link("trust", ok, f"trusts {provider} for {who.name} (aud {AUDIENCE})" if ok
             else f"the trust policy does not name exactly that provider, {who.name} and audience {AUDIENCE}")
    else:
        link("trust", False, "no role or no provider to trust")
    policy = iam_api.inline_policy(where.aws, where.region, name) if role is not None else None
    ok = bucket is not None and policy == checkpoint_policy(bucket, where.tag)
    link("policy", ok, f"S3 limited to s3://{bucket}/{pol.checkpoint_prefix(where.tag)} + CloudWatch metrics" if ok
         else ("no permissions policy" if policy is None else "the permissions policy differs"))
    sa = kube_call("read the checkpointing service account", read_sa, api, who)
    annotation = wire.annotations(sa).get(ROLE_ANNOTATION) if sa is not None else None
    link("serviceAccount", sa is not None,
         f"{who.namespace}/{who.service_account} " + ("exists" if sa is not None else "does not exist"))
    ok = role is not None and annotation == role["Arn"]
    link("annotation", ok, f"{ROLE_ANNOTATION} = {annotation}" if ok
         else f"{ROLE_ANNOTATION} is {annotation or 'missing'}, want {role['Arn'] if role else 'the role ARN'}")
    enabled = all(x["ok"] for x in links)
    return {
        "enabled": enabled,
        "state": "ENABLED" if enabled else ("DISABLED" if config.get("Mode") != "Enable" and role is None
                                             and annotation is None else "BROKEN"),
        "config": config,
        "namespace": who.namespace,
        "serviceAccount": who.service_account,
        "checkpointPrefix": f"s3://{bucket}/{pol.checkpoint_prefix(where.tag)}" if bucket else None,
        "chain": links,
    }


def require_bucket(bucket: str | None) -> str:
    """The project bucket, or a typed error with the fix."""
    if not bucket:
        raise DependencyFailed(
            "tieredStorage needs the project bucket, which the cluster's EKS stage did not record.",
            hint="Run the EKS stage again (operation_retry) so it records the bucket.",
        )
    return bucket
