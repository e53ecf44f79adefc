"""The EKS cluster APIs the twin takes over from moto: create, describe, delete, update config and version, updates.

moto keeps node groups and tags. CreateCluster checks what EKS checks before it accepts a cluster:
subnets in two AZs of one VPC, existing security groups, a supported version and authentication mode,
and a cluster role that exists.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
import uuid
from collections.abc import Callable
from typing import Any

from .context import AwsContext, hex_id
from .eks_clusters import (
    AUTH_ORDER,
    CLUSTER_DELETE,
    CLUSTER_UPDATE,
    DEFAULT_K8S_VERSION,
    EKS,
    K8S_VERSIONS,
    EksState,
    bootstrap,
    cluster_shape,
    invalid_param,
    not_found,
    schedule_activation,
    update_record,
)
from .eks_pod_identity import iam_principal_exists
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response

Handler = Callable[[AwsContext, EksState, AwsRequest], RawResponse]
VERSION_UPDATE = 480.0  # twin seconds: a control plane version update takes minutes on EKS


def _check_network(ctx: AwsContext, region: str, name: Any, vpc: dict[str, Any]) -> str:
    """The VPC id of the cluster's subnets; InvalidParameterException where EKS refuses them."""
    zones, vpc_ids = set(), set()
    for subnet in vpc.get("subnetIds") or []:
        try:
            az, _id, vpc_id = ctx.subnet_az(region, subnet)
        except AwsError as exc:
            raise invalid_param(f"The subnet ID '{subnet}' does not exist") from exc
        zones.add(az)
        vpc_ids.add(vpc_id)
    if len(zones) < 2:
        raise invalid_param("Subnets specified must be in at least two different AZs", clusterName=name)
    if len(vpc_ids) != 1:
        raise invalid_param("Subnets specified must belong to the same VPC", clusterName=name)
    ec2 = ctx.ec2(region)
    for sg in vpc.get("securityGroupIds") or []:
        if ec2.get_security_group_from_id(sg) is None:
            raise invalid_param(f"Security group {sg} does not exist", clusterName=name)
    return next(iter(vpc_ids))


def _check_settings(ctx: AwsContext, p: dict[str, Any]) -> tuple[str, str]:
    version = str(p.get("version") or DEFAULT_K8S_VERSION)
    if version not in K8S_VERSIONS:
        raise invalid_param(f"unsupported Kubernetes version {version}", clusterName=p.get("name"))
    mode = (p.get("accessConfig") or {}).get("authenticationMode", "CONFIG_MAP")
    if mode not in AUTH_ORDER:
        raise invalid_param(f"Unsupported authentication mode {mode}")
    role = str(p.get("roleArn") or "")
    if ":role/" not in role or not iam_principal_exists(ctx, role):
        raise invalid_param(f"Role with arn: {role}, could not be assumed because it does not exist or the "
                            "trusted entity is not correct", clusterName=p.get("name"))
    return version, mode


def _moto_create(ctx: AwsContext, region: str, p: dict[str, Any], vpc: dict[str, Any], version: str) -> Any:
    network = copy.deepcopy(p.get("kubernetesNetworkConfig") or {})
    network.setdefault("serviceIpv4Cidr", "172.20.0.0/16")
    network.setdefault("ipFamily", "ipv4")
    network.setdefault("elasticLoadBalancing", {"enabled": False})
    try:
        return ctx.eks(region).create_cluster(
            name=p.get("name"), role_arn=p.get("roleArn"), resources_vpc_config=vpc, version=version,
            kubernetes_network_config=network, logging=p.get("logging"),
            client_request_token=p.get("clientRequestToken"), tags=p.get("tags"),
            encryption_config=p.get("encryptionConfig"), remote_network_config=p.get("remoteNetworkConfig"),
        )
    except Exception as exc:
        code = type(exc).__name__
        if code in ("ResourceInUseException", "InvalidParameterException", "ResourceLimitExceededException"):
            raise AwsError(code, getattr(exc, "message", str(exc)) or str(exc)) from exc
        raise


def _cluster_security_group(ctx: AwsContext, region: str, cluster: Any, vpc_id: str) -> str | None:
    try:
        group = ctx.ec2(region).create_security_group(
            f"eks-cluster-sg-{cluster.name}-{hex_id(8)}",
            "EKS created security group applied to ENI that is attached to EKS Control Plane "
            "master nodes, as well as any managed workloads.",
            vpc_id=vpc_id,
            tags={"aws:eks:cluster-name": cluster.name, f"kubernetes.io/cluster/{cluster.name}": "owned"},
        )
        return str(group.id)
    except Exception:
        return None


def create(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """CreateCluster: CREATING now, ACTIVE (or FAILED by a fault) after CLUSTER_CREATE twin seconds."""
    p = req.params
    vpc = copy.deepcopy(p.get("resourcesVpcConfig") or {})
    with ctx.locked():
        vpc_id = _check_network(ctx, req.region, p.get("name"), vpc)
        version, mode = _check_settings(ctx, p)
        cluster = _moto_create(ctx, req.region, p, vpc, version)
        sg_id = _cluster_security_group(ctx, req.region, cluster, vpc_id)
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
        cluster.identity = {"oidc": {"issuer": f"https://oidc.eks.{req.region}.amazonaws.com/id/{hex_id(32).upper()}"}}
        access = p.get("accessConfig") or {}
        cluster.access_config = {
            "authenticationMode": mode,
            "bootstrapClusterCreatorAdminPermissions": access.get("bootstrapClusterCreatorAdminPermissions", True),
        }
        cluster.platformVersion = "eks.1"
        extra = state.cluster_extras(req.region, cluster.name)
        extra.generation += 1
        shape = cluster_shape(cluster)
    schedule_activation(ctx, state, req.region, cluster, extra.generation)
    return json_response(req, {"cluster": shape})


def describe(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """DescribeCluster."""
    with ctx.locked():
        return json_response(req, {"cluster": cluster_shape(state.cluster(req.region, req.params.get("clusterName")))})


def delete(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """DeleteCluster: refused with node groups attached or an update in progress; DELETING, gone after
    CLUSTER_DELETE twin seconds."""
    with ctx.locked():
        cluster = state.cluster(req.region, req.params.get("clusterName"))
        if cluster.nodegroups:
            raise AwsError("ResourceInUseException", "Cluster has nodegroups attached", 409, clusterName=cluster.name)
        extra = state.cluster_extras(req.region, cluster.name)
        if cluster.status != "DELETING" and any(u["status"] == "InProgress" for u in extra.updates.values()):
            # As EKS answers (409, quoted in aws/containers-roadmap#1511 and eksctl-io/eksctl#4979).
            raise AwsError("ResourceInUseException",
                           f"Cannot delete because cluster {cluster.name} currently has an update in progress", 409,
                           clusterName=cluster.name)
        if cluster.status != "DELETING":
            cluster.status = "DELETING"
            extra = state.cluster_extras(req.region, cluster.name)
            extra.generation += 1
            generation, region = extra.generation, req.region
            ctx.later(CLUSTER_DELETE, lambda: _gone(ctx, state, region, cluster, extra, generation))
        return json_response(req, {"cluster": cluster_shape(cluster)})


def _gone(ctx: AwsContext, state: EksState, region: str, cluster: Any, extra: Any, generation: int) -> None:
    if state.extras.get((region, cluster.name)) is not extra or extra is None or extra.generation != generation:
        return
    backend = ctx.eks(region)
    if backend.clusters.get(cluster.name) is cluster:
        backend.delete_cluster(cluster.name)
    sg = (cluster.resources_vpc_config or {}).get("clusterSecurityGroupId")
    if sg:
        # The SG may already be gone; deleting it is best effort as in EKS.
        with contextlib.suppress(Exception):
            ctx.ec2(region).delete_security_group(group_id=sg)
    del state.extras[(region, cluster.name)]
    ctx.emit("eks.cluster.deleted", name=cluster.name, arn=cluster.arn)


def _access_change(ctx: AwsContext, state: EksState, region: str, cluster: Any, config: dict[str, Any],
                   params: list[dict[str, str]], apply: list[Callable[[], Any]]) -> None:
    new_mode = config.get("authenticationMode")
    old_mode = cluster.access_config.get("authenticationMode", "CONFIG_MAP")
    if new_mode not in AUTH_ORDER:
        raise invalid_param(f"Unsupported authentication mode {new_mode}")
    if AUTH_ORDER.index(new_mode) < AUTH_ORDER.index(old_mode):
        raise invalid_param(f"Unsupported authentication mode update from {old_mode} to {new_mode}")
    if new_mode == old_mode:
        raise invalid_param(f"Cluster is already in authentication mode {new_mode}")
    params.append({"type": "AuthenticationMode", "value": new_mode})
    apply.append(lambda: cluster.access_config.update(authenticationMode=new_mode))
    if old_mode == "CONFIG_MAP" and cluster.access_config.get("bootstrapClusterCreatorAdminPermissions", True):
        # Turning access entries on keeps the creator's administrator access as an entry.
        apply.append(lambda: bootstrap(ctx, state, region, cluster))


def _endpoint_change(cluster: Any, vpc: dict[str, Any], params: list[dict[str, str]],
                     apply: list[Callable[[], Any]]) -> None:
    for key, label in (("endpointPublicAccess", "EndpointPublicAccess"),
                       ("endpointPrivateAccess", "EndpointPrivateAccess")):
        if key in vpc:
            params.append({"type": label, "value": str(vpc[key]).lower()})
    if "publicAccessCidrs" in vpc:
        params.append({"type": "PublicAccessCidrs", "value": str(vpc["publicAccessCidrs"])})
    kept = ("endpointPublicAccess", "endpointPrivateAccess", "publicAccessCidrs")
    apply.append(lambda: cluster.resources_vpc_config.update({k: v for k, v in vpc.items() if k in kept}))


def update_config(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """UpdateClusterConfig: access mode (only towards API), endpoint access, logging; one update at a time."""
    p = req.params
    with ctx.locked():
        cluster = state.active(req.region, p.get("clusterName"))
        extra = state.cluster_extras(req.region, cluster.name)
        if any(u["status"] == "InProgress" for u in extra.updates.values()):
            raise AwsError("ResourceInUseException", "An update is already in progress", 409, clusterName=cluster.name)
        params: list[dict[str, str]] = []
        kind = "ConfigUpdate"
        apply: list[Callable[[], Any]] = []
        if p.get("accessConfig"):
            kind = "AccessConfigUpdate"
            _access_change(ctx, state, req.region, cluster, p["accessConfig"], params, apply)
        if p.get("resourcesVpcConfig"):
            kind = "EndpointAccessUpdate"
            _endpoint_change(cluster, p["resourcesVpcConfig"], params, apply)
        if p.get("logging"):
            kind = "LoggingUpdate"
            params.append({"type": "ClusterLogging", "value": str(p["logging"])})
            apply.append(lambda: setattr(cluster, "logging", p["logging"]))
        if not params:
            raise invalid_param("No changes needed")
        update = update_record(kind, params, ctx.clock.wall())
        extra.updates[update["id"]] = update
        cluster.status = "UPDATING"
        region = req.region

        def done() -> None:
            if ctx.eks(region).clusters.get(cluster.name) is not cluster:
                return
            for fn in apply:
                fn()
            update["status"] = "Successful"
            if cluster.status == "UPDATING":
                cluster.status = "ACTIVE"
            state.publish_access(region, cluster)

        ctx.later(CLUSTER_UPDATE, done)
    return json_response(req, {"update": update})


def update_version(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """UpdateClusterVersion: one minor version up only (as EKS, InvalidParameterException otherwise), one update
    at a time; UPDATING with a VersionUpdate InProgress, then Successful and the new version after
    VERSION_UPDATE twin seconds. The same clientRequestToken returns the same update."""
    p = req.params
    with ctx.locked():
        cluster = state.active(req.region, p.get("name"))
        extra = state.cluster_extras(req.region, cluster.name)
        token = p.get("clientRequestToken")
        for update in extra.updates.values():
            if token and update.get("type") == "VersionUpdate" and update.get("token") == token:
                return json_response(req, {"update": _shown(update)})
        if any(u["status"] == "InProgress" for u in extra.updates.values()):
            raise AwsError("ResourceInUseException", "An update is already in progress", 409, clusterName=cluster.name)
        wanted, current = str(p.get("version") or ""), str(cluster.version)
        if wanted not in K8S_VERSIONS:
            raise invalid_param(f"unsupported Kubernetes version {wanted}", clusterName=cluster.name)
        if int(wanted.split(".")[1]) != int(current.split(".")[1]) + 1:
            raise invalid_param(f"Unsupported Kubernetes minor version update from {current} to {wanted}",
                                clusterName=cluster.name)
        update = update_record("VersionUpdate", [{"type": "Version", "value": wanted},
                                                 {"type": "PlatformVersion", "value": "eks.1"}], ctx.clock.wall())
        if token:
            update["token"] = token
        extra.updates[update["id"]] = update
        cluster.status = "UPDATING"
        region, generation = req.region, extra.generation

        def done() -> None:
            if ctx.eks(region).clusters.get(cluster.name) is not cluster or extra.generation != generation:
                return
            cluster.version, cluster.platformVersion = wanted, "eks.1"
            update["status"] = "Successful"
            if cluster.status == "UPDATING":
                cluster.status = "ACTIVE"
            ctx.emit("eks.cluster.version_updated", name=cluster.name, arn=cluster.arn, version=wanted)

        ctx.later(VERSION_UPDATE, done)
    return json_response(req, {"update": _shown(update)})


def _shown(update: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in update.items() if k != "token"}


def describe_update(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """DescribeUpdate (node group updates are moto's)."""
    p = req.params
    with ctx.locked():
        cluster = state.cluster(req.region, p.get("clusterName"))
        update = state.cluster_extras(req.region, cluster.name).updates.get(str(p.get("updateId")))
        if update is None:
            if p.get("nodegroupName"):
                raise PassThrough()
            raise not_found(f"No update found for ID: {p.get('updateId')}", clusterName=cluster.name)
        return json_response(req, {"update": _shown(update)})


def list_updates(ctx: AwsContext, state: EksState, req: AwsRequest) -> RawResponse:
    """ListUpdates of the cluster, or of one add-on."""
    p = req.params
    with ctx.locked():
        cluster = state.cluster(req.region, p.get("clusterName"))
        extra = state.cluster_extras(req.region, cluster.name)
        ids = [u["id"] for u in extra.updates.values()
               if (p.get("addonName") is None) == ("addon" not in u) and u.get("addon") in (None, p.get("addonName"))]
    return json_response(req, {"updateIds": ids})


HANDLERS: dict[str, Handler] = {
    "CreateCluster": create,
    "DescribeCluster": describe,
    "DeleteCluster": delete,
    "UpdateClusterConfig": update_config,
    "UpdateClusterVersion": update_version,
    "DescribeUpdate": describe_update,
    "ListUpdates": list_updates,
}


def register(ctx: AwsContext, state: EksState) -> None:
    """Route the cluster APIs; moto keeps node groups and tags."""
    for operation, handler in HANDLERS.items():
        ctx.route(EKS, operation)(functools.partial(handler, ctx, state))
    ctx.on_reset(state.reset)
