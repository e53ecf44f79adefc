"""EKS clusters on the twin clock: CREATING→ACTIVE with a real API server endpoint, access config, updates."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from .context import AwsContext, hex_id
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response

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
        "health": {"issues": []},
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


def _update_record(kind: str, params: list[dict[str, str]], now: float) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "status": "InProgress",
        "type": kind,
        "params": params,
        "createdAt": now,
        "errors": [],
    }


def register(ctx: AwsContext, state: EksState) -> None:
    """Take over EKS cluster create/describe/delete/update-config; moto keeps node groups and tags."""

    @ctx.route(EKS, "CreateCluster")
    def create(req: AwsRequest) -> RawResponse:
        p = req.params
        vpc = copy.deepcopy(p.get("resourcesVpcConfig") or {})
        subnets = list(vpc.get("subnetIds") or [])
        with ctx.locked():
            zones, vpc_ids = set(), set()
            for s in subnets:
                try:
                    az, _id, vpc_id = ctx.subnet_az(req.region, s)
                except AwsError as exc:
                    raise invalid_param(f"The subnet ID '{s}' does not exist") from exc
                zones.add(az)
                vpc_ids.add(vpc_id)
            if len(zones) < 2:
                raise invalid_param(
                    "Subnets specified must be in at least two different AZs", clusterName=p.get("name")
                )
            if len(vpc_ids) != 1:
                raise invalid_param("Subnets specified must belong to the same VPC", clusterName=p.get("name"))
            ec2 = ctx.ec2(req.region)
            for sg in vpc.get("securityGroupIds") or []:
                if ec2.get_security_group_from_id(sg) is None:
                    raise invalid_param(f"Security group {sg} does not exist", clusterName=p.get("name"))
            version = str(p.get("version") or DEFAULT_K8S_VERSION)
            if version not in K8S_VERSIONS:
                raise invalid_param(f"unsupported Kubernetes version {version}", clusterName=p.get("name"))
            access = copy.deepcopy(p.get("accessConfig") or {})
            mode = access.get("authenticationMode", "CONFIG_MAP")
            if mode not in AUTH_ORDER:
                raise invalid_param(f"Unsupported authentication mode {mode}")
            network = copy.deepcopy(p.get("kubernetesNetworkConfig") or {})
            network.setdefault("serviceIpv4Cidr", "172.20.0.0/16")
            network.setdefault("ipFamily", "ipv4")
            network.setdefault("elasticLoadBalancing", {"enabled": False})
            backend = ctx.eks(req.region)
            try:
                cluster = backend.create_cluster(
                    name=p.get("name"),
                    role_arn=p.get("roleArn"),
                    resources_vpc_config=vpc,
                    version=version,
                    kubernetes_network_config=network,
                    logging=p.get("logging"),
                    client_request_token=p.get("clientRequestToken"),
                    tags=p.get("tags"),
                    encryption_config=p.get("encryptionConfig"),
                    remote_network_config=p.get("remoteNetworkConfig"),
                )
            except Exception as exc:
                code = type(exc).__name__
                if code in ("ResourceInUseException", "InvalidParameterException", "ResourceLimitExceededException"):
                    raise AwsError(code, getattr(exc, "message", str(exc)) or str(exc)) from exc
                raise
            vpc_id = next(iter(vpc_ids))
            sg_name = f"eks-cluster-sg-{cluster.name}-{hex_id(8)}"
            try:
                cluster_sg = ec2.create_security_group(
                    sg_name,
                    "EKS created security group applied to ENI that is attached to EKS Control Plane "
                    "master nodes, as well as any managed workloads.",
                    vpc_id=vpc_id,
                    tags={"aws:eks:cluster-name": cluster.name, f"kubernetes.io/cluster/{cluster.name}": "owned"},
                )
                sg_id = cluster_sg.id
            except Exception:
                sg_id = None
            vpc.setdefault("endpointPublicAccess", True)
            vpc.setdefault("endpointPrivateAccess", False)
            vpc.setdefault("publicAccessCidrs", ["0.0.0.0/0"])
            vpc.setdefault("securityGroupIds", [])
            vpc["vpcId"] = vpc_id
            if sg_id:
                vpc["clusterSecurityGroupId"] = sg_id
            cluster.resources_vpc_config = vpc
            cluster.status = "CREATING"
            cluster.created_at = dt.datetime.fromtimestamp(ctx.clock.wall(), dt.UTC)  # twin time, like HyperPod
            cluster.endpoint = None
            cluster.certificate_authority = None
            cluster.twin_id = str(uuid.uuid4())
            oidc_id = hex_id(32).upper()
            cluster.identity = {"oidc": {"issuer": f"https://oidc.eks.{req.region}.amazonaws.com/id/{oidc_id}"}}
            cluster.access_config = {
                "authenticationMode": mode,
                "bootstrapClusterCreatorAdminPermissions": access.get("bootstrapClusterCreatorAdminPermissions", True),
            }
            cluster.platformVersion = "eks.1"
            extra = state.cluster_extras(req.region, cluster.name)
            extra.generation += 1
            shape = cluster_shape(cluster)
        _schedule_activation(ctx, state, req.region, cluster, extra.generation)
        return json_response(req, {"cluster": shape})

    @ctx.route(EKS, "DescribeCluster")
    def describe(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            return json_response(
                req, {"cluster": cluster_shape(state.cluster(req.region, req.params.get("clusterName")))}
            )

    @ctx.route(EKS, "DeleteCluster")
    def delete(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            cluster = state.cluster(req.region, req.params.get("clusterName"))
            if cluster.nodegroups:
                raise AwsError(
                    "ResourceInUseException", "Cluster has nodegroups attached", 409, clusterName=cluster.name
                )
            if cluster.status != "DELETING":
                cluster.status = "DELETING"
                extra = state.cluster_extras(req.region, cluster.name)
                extra.generation += 1
                generation = extra.generation

                def gone() -> None:
                    if state.extras.get((req.region, cluster.name)) is not extra or extra.generation != generation:
                        return
                    backend = ctx.eks(req.region)
                    if backend.clusters.get(cluster.name) is cluster:
                        backend.delete_cluster(cluster.name)
                    sg = (cluster.resources_vpc_config or {}).get("clusterSecurityGroupId")
                    if sg:
                        # The SG may already be gone; deleting it is best effort as in EKS.
                        with contextlib.suppress(Exception):
                            ctx.ec2(req.region).delete_security_group(group_id=sg)
                    del state.extras[(req.region, cluster.name)]
                    ctx.emit("eks.cluster.deleted", name=cluster.name, arn=cluster.arn)

                ctx.later(CLUSTER_DELETE, gone)
            return json_response(req, {"cluster": cluster_shape(cluster)})

    @ctx.route(EKS, "UpdateClusterConfig")
    def update_config(req: AwsRequest) -> RawResponse:
        p = req.params
        with ctx.locked():
            cluster = state.active(req.region, p.get("clusterName"))
            extra = state.cluster_extras(req.region, cluster.name)
            if any(u["status"] == "InProgress" for u in extra.updates.values()):
                raise AwsError(
                    "ResourceInUseException", "An update is already in progress", 409, clusterName=cluster.name
                )
            params: list[dict[str, str]] = []
            kind = "ConfigUpdate"
            apply: list[Any] = []
            if p.get("accessConfig"):
                new_mode = p["accessConfig"].get("authenticationMode")
                enabling = cluster.access_config.get("authenticationMode", "CONFIG_MAP") == "CONFIG_MAP"
                old_mode = cluster.access_config.get("authenticationMode", "CONFIG_MAP")
                if new_mode not in AUTH_ORDER:
                    raise invalid_param(f"Unsupported authentication mode {new_mode}")
                if AUTH_ORDER.index(new_mode) < AUTH_ORDER.index(old_mode):
                    raise invalid_param(f"Unsupported authentication mode update from {old_mode} to {new_mode}")
                if new_mode == old_mode:
                    raise invalid_param(f"Cluster is already in authentication mode {new_mode}")
                kind = "AccessConfigUpdate"
                params.append({"type": "AuthenticationMode", "value": new_mode})
                apply.append(lambda: cluster.access_config.update(authenticationMode=new_mode))
                if enabling and cluster.access_config.get("bootstrapClusterCreatorAdminPermissions", True):
                    # Turning access entries on keeps the creator's administrator access as an entry.
                    apply.append(lambda: _bootstrap(ctx, state, req.region, cluster))
            vpc = p.get("resourcesVpcConfig")
            if vpc:
                kind = "EndpointAccessUpdate"
                for key, label in (
                    ("endpointPublicAccess", "EndpointPublicAccess"),
                    ("endpointPrivateAccess", "EndpointPrivateAccess"),
                ):
                    if key in vpc:
                        params.append({"type": label, "value": str(vpc[key]).lower()})
                if "publicAccessCidrs" in vpc:
                    params.append({"type": "PublicAccessCidrs", "value": str(vpc["publicAccessCidrs"])})
                apply.append(
                    lambda: cluster.resources_vpc_config.update(
                        {
                            k: v
                            for k, v in vpc.items()
                            if k in ("endpointPublicAccess", "endpointPrivateAccess", "publicAccessCidrs")
                        }
                    )
                )
            if p.get("logging"):
                kind = "LoggingUpdate"
                params.append({"type": "ClusterLogging", "value": str(p["logging"])})
                apply.append(lambda: setattr(cluster, "logging", p["logging"]))
            if not params:
                raise invalid_param("No changes needed")
            update = _update_record(kind, params, ctx.clock.wall())
            extra.updates[update["id"]] = update
            cluster.status = "UPDATING"

            def done() -> None:
                if ctx.eks(req.region).clusters.get(cluster.name) is not cluster:
                    return
                for fn in apply:
                    fn()
                update["status"] = "Successful"
                if cluster.status == "UPDATING":
                    cluster.status = "ACTIVE"
                state.publish_access(req.region, cluster)

            ctx.later(CLUSTER_UPDATE, done)
        return json_response(req, {"update": update})

    @ctx.route(EKS, "DescribeUpdate")
    def describe_update(req: AwsRequest) -> RawResponse:
        p = req.params
        with ctx.locked():
            cluster = state.cluster(req.region, p.get("clusterName"))
            update = state.cluster_extras(req.region, cluster.name).updates.get(str(p.get("updateId")))
            if update is None:
                if p.get("nodegroupName"):
                    raise PassThrough()
                raise not_found(f"No update found for ID: {p.get('updateId')}", clusterName=cluster.name)
            return json_response(req, {"update": copy.deepcopy(update)})

    @ctx.route(EKS, "ListUpdates")
    def list_updates(req: AwsRequest) -> RawResponse:
        p = req.params
        with ctx.locked():
            cluster = state.cluster(req.region, p.get("clusterName"))
            extra = state.cluster_extras(req.region, cluster.name)
            ids = [
                u["id"]
                for u in extra.updates.values()
                if (p.get("addonName") is None) == ("addon" not in u) and u.get("addon") in (None, p.get("addonName"))
            ]
        return json_response(req, {"updateIds": ids})

    ctx.on_reset(state.reset)


def _schedule_activation(ctx: AwsContext, state: EksState, region: str, cluster: Any, generation: int) -> None:
    """At CLUSTER_CREATE: ask the bus for the API server endpoint (outside the lock), then go ACTIVE."""

    def activate() -> None:
        with ctx.locked():
            extra = state.extras.get((region, cluster.name))
            if extra is None or extra.generation != generation or cluster.status != "CREATING":
                return
        endpoint: tuple[str, str] | None = None
        for result in ctx.bus.publish(
            "eks.cluster.activating", name=cluster.name, arn=cluster.arn, region=region,
            issuer=((getattr(cluster, "identity", None) or {}).get("oidc") or {}).get("issuer"),
        ):
            if result is not None:
                endpoint = (str(result[0]), str(result[1]))
                break
        with ctx.locked():
            if state.extras.get((region, cluster.name)) is not extra or extra.generation != generation:
                return
            if endpoint is not None:
                cluster.endpoint = endpoint[0]
                cluster.certificate_authority = {"data": endpoint[1]}
            cluster.status = "ACTIVE"
            if cluster.access_config.get("bootstrapClusterCreatorAdminPermissions", True) and cluster.access_config.get(
                "authenticationMode"
            ) in ("API", "API_AND_CONFIG_MAP"):
                _bootstrap(ctx, state, region, cluster)
            state.publish_access(region, cluster)

    ctx.clock.schedule(CLUSTER_CREATE, activate)


def _bootstrap(ctx: AwsContext, state: EksState, region: str, cluster: Any) -> None:
    from .eks_access import bootstrap_creator  # eks_access builds on this module

    bootstrap_creator(ctx, state, region, cluster)
