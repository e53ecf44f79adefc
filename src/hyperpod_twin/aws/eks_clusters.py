"""EKS clusters on the twin clock: state, shapes, activation (CREATING→ACTIVE, or FAILED by a fault).

The API handlers are in `eks_cluster_api.py`.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

from .context import AwsContext
from .protocol import AwsError

EKS = "eks"
# Kubernetes versions EKS offers (HyperPod supports 1.28 and later).
K8S_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
DEFAULT_K8S_VERSION = "1.33"
CLUSTER_CREATE = 600.0  # twin seconds CREATING -> ACTIVE
CLUSTER_DELETE = 300.0
CLUSTER_UPDATE = 120.0
AUTH_ORDER = ("CONFIG_MAP", "API_AND_CONFIG_MAP", "API")


def invalid_param(message: str, **extra: Any) -> AwsError:
    """EKS InvalidParameterException."""
    return AwsError("InvalidParameterException", message, **extra)


def not_found(message: str, **extra: Any) -> AwsError:
    """EKS ResourceNotFoundException."""
    return AwsError("ResourceNotFoundException", message, 404, **extra)


@dataclass
class EksExtras:
    """What the twin keeps beside moto's EKS cluster object."""

    access_entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # principalArn -> entry
    policies: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # principal -> policy -> assoc
    addons: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_identities: dict[str, dict[str, Any]] = field(default_factory=dict)  # associationId -> association
    updates: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: int = 0


class EksState:
    """Per-cluster extras keyed by (region, cluster name), plus helpers over moto's EKS backend."""

    def __init__(self, ctx: AwsContext) -> None:
        self.ctx = ctx
        self.extras: dict[tuple[str, str], EksExtras] = {}

    def reset(self) -> None:
        """Forget every extra."""
        self.extras.clear()

    def cluster(self, region: str, name: Any) -> Any:
        """moto's cluster object, or ResourceNotFoundException."""
        cluster = self.ctx.eks(region).clusters.get(str(name))
        if cluster is None:
            raise not_found(f"No cluster found for name: {name}.", clusterName=str(name))
        return cluster

    def active(self, region: str, name: Any) -> Any:
        """The cluster, which must be ACTIVE (InvalidRequestException otherwise)."""
        cluster = self.cluster(region, name)
        if cluster.status not in ("ACTIVE", "UPDATING"):
            raise AwsError(
                "InvalidRequestException", f"Cluster '{cluster.name}' is not in ACTIVE status", clusterName=cluster.name
            )
        return cluster

    def cluster_extras(self, region: str, name: str) -> EksExtras:
        """The extras of a cluster (created on first use)."""
        return self.extras.setdefault((region, name), EksExtras())

    def access_entries(self, region: str, name: str) -> list[dict[str, Any]]:
        """Access entries of a cluster with their associated access policies (`accessPolicies`)."""
        extra = self.extras.get((region, name))
        if extra is None:
            return []
        return [
            {**copy.deepcopy(entry), "accessPolicies": [copy.deepcopy(a) for a in extra.policies.get(arn, {}).values()]}
            for arn, entry in extra.access_entries.items()
        ]

    def publish_access(self, region: str, cluster: Any) -> None:
        """`eks.access_entries.changed`: the Kubernetes side maps IAM principals through these.

        Nothing is published for a CONFIG_MAP cluster: access is then decided by aws-auth, and the
        creator's implicit administrator access is not an access entry.
        """
        if cluster.access_config.get("authenticationMode", "CONFIG_MAP") == "CONFIG_MAP":
            return
        entries = self.access_entries(region, cluster.name)
        self.ctx.emit("eks.access_entries.changed", cluster_name=cluster.name, cluster_arn=cluster.arn, entries=entries)


def cluster_shape(cluster: Any) -> dict[str, Any]:
    """The EKS `Cluster` structure for a moto cluster plus the twin's additions."""
    out: dict[str, Any] = {
        "name": cluster.name,
        "arn": cluster.arn,
        "createdAt": cluster.created_at,
        "version": cluster.version,
        "roleArn": cluster.role_arn,
        "resourcesVpcConfig": copy.deepcopy(cluster.resources_vpc_config),
        "kubernetesNetworkConfig": copy.deepcopy(cluster.kubernetes_network_config),
        "logging": copy.deepcopy(cluster.logging),
        "identity": copy.deepcopy(cluster.identity),
        "status": cluster.status,
        "platformVersion": cluster.platformVersion,
        "tags": dict(cluster.tags or {}),
        "encryptionConfig": copy.deepcopy(cluster.encryption_config or []),
        "accessConfig": copy.deepcopy(getattr(cluster, "access_config", {"authenticationMode": "CONFIG_MAP"})),
        "health": {"issues": copy.deepcopy(getattr(cluster, "twin_health", []))},
        "upgradePolicy": {"supportType": "STANDARD"},
    }
    if getattr(cluster, "twin_id", None):
        out["id"] = cluster.twin_id
    if cluster.endpoint:
        out["endpoint"] = cluster.endpoint
    if cluster.certificate_authority and cluster.certificate_authority.get("data"):
        out["certificateAuthority"] = dict(cluster.certificate_authority)
    if cluster.client_request_token:
        out["clientRequestToken"] = cluster.client_request_token
    if cluster.remote_network_config:
        out["remoteNetworkConfig"] = copy.deepcopy(cluster.remote_network_config)
    return out


def update_record(kind: str, params: list[dict[str, str]], now: float) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "status": "InProgress",
        "type": kind,
        "params": params,
        "createdAt": now,
        "errors": [],
    }


def schedule_activation(ctx: AwsContext, state: EksState, region: str, cluster: Any, generation: int) -> None:
    """At CLUSTER_CREATE: ask the bus for the API server endpoint (outside the lock), then go ACTIVE."""

    def activate() -> None:
        with ctx.locked():
            extra = state.extras.get((region, cluster.name))
            if extra is None or extra.generation != generation or cluster.status != "CREATING":
                return
        endpoint: tuple[str, str] | None = None
        for result in ctx.bus.publish(
            "eks.cluster.activating", name=cluster.name, arn=cluster.arn, region=region, version=str(cluster.version),
            issuer=((getattr(cluster, "identity", None) or {}).get("oidc") or {}).get("issuer"),
        ):
            if result is not None:
                endpoint = (str(result[0]), str(result[1]))
                break
        with ctx.locked():
            if state.extras.get((region, cluster.name)) is not extra or extra.generation != generation:
                return
            fault = ctx.faults.lifecycle("eks_failure", cluster=cluster.name)
            if fault is not None:
                # A scripted EKS creation failure: FAILED with the reason as a health issue.
                cluster.status = "FAILED"
                cluster.twin_health = [{"code": fault.code or "Ec2SubnetInvalidConfiguration",
                                        "message": fault.message or "One or more Amazon EC2 Subnets of "
                                        "the cluster are invalid.", "resourceIds": []}]
                return
            if endpoint is not None:
                cluster.endpoint = endpoint[0]
                cluster.certificate_authority = {"data": endpoint[1]}
            cluster.status = "ACTIVE"
            if cluster.access_config.get("bootstrapClusterCreatorAdminPermissions", True) and cluster.access_config.get(
                "authenticationMode"
            ) in ("API", "API_AND_CONFIG_MAP"):
                bootstrap(ctx, state, region, cluster)
            state.publish_access(region, cluster)

    ctx.clock.schedule(CLUSTER_CREATE, activate)


def bootstrap(ctx: AwsContext, state: EksState, region: str, cluster: Any) -> None:
    from .eks_access import bootstrap_creator  # eks_access builds on this module

    bootstrap_creator(ctx, state, region, cluster)
