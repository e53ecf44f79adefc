"""How each kind of ledger resource is deleted, and whether one is still there (cluster deletion's adapters)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from instantstart.aws import amp, ec2_network, eks, elbv2, grafana, hyperpod, iam, mlflow
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import error_code
from instantstart.context import AppContext
from instantstart.errors import NotFound, Unsupported
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.services.base.network import tagged
from instantstart.services.base.registry import get_cluster
from instantstart.services.cluster.deletion_owner import check_eks_cluster, check_hyperpod_cluster, delete_oidc_provider
from instantstart.services.core.project_bucket import delete_share
from instantstart.services.storage import fsx_delete
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)


def is_gone(exc: BaseException) -> bool:
    """Whether `exc` says the resource does not exist (any service's NotFound, the Kubernetes API's 404)."""
    if isinstance(exc, NotFound) or getattr(exc, "status", None) == 404:  # NotFound, or the Kubernetes API's 404
        return True
    code = error_code(exc)
    return code.endswith(("NotFound", "NotFoundException", "NoSuchEntity", "NoSuchBucket")) or code in (
        "ResourceNotFound",
        "InvalidAllocationID.NotFound",
        "InvalidVpcID.NotFound",
    )


def _row_of(app: AppContext, res: dict[str, Any]) -> ClusterRow:
    return get_cluster(app.db, res.get("details", {}).get("clusterTag") or res["clusterTag"])


def _delete_lb_service(app: AppContext, res: dict[str, Any]) -> bool:
    namespace, name = res["resourceId"].split("/", 1)
    row = _row_of(app, res)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    kube_call(f"delete Service {namespace}/{name}", core_kinds.delete_service, api, name=name, namespace=namespace)
    return False


def _delete_eks_cluster(app: AppContext, res: dict[str, Any]) -> bool:
    # Gone already (a stage retried after its DeleteCluster): done. Calling DeleteCluster on a cluster that no
    # longer exists is refused (AccessDenied: the policy allows it only on tagged clusters), not NotFound.
    if not check_eks_cluster(app, res, res["clusterTag"]):
        return True
    eks.delete_cluster(app.aws, res["region"], res["resourceId"])
    app.kube.forget(res["resourceId"], res["region"])
    return False


def _delete_pod_identity(app: AppContext, res: dict[str, Any]) -> bool:
    cluster, _, assoc = res["resourceId"].rpartition("/")
    cluster = cluster or str(res.get("details", {}).get("clusterName", ""))
    eks.delete_pod_identity_association(app.aws, res["region"], cluster, assoc)
    return True


def _deleter(fn: Callable[[AwsClients, str, str], None], done: bool) -> Deleter:
    """A deleter that calls an adapter with (clients, region, id); `done`: gone once the call returns."""

    def delete(app: AppContext, res: dict[str, Any]) -> bool:
        fn(app.aws, res["region"], res["resourceId"])
        return done

    return delete


def _delete_addon(aws: AwsClients, region: str, rid: str) -> None:
    cluster, _, name = rid.partition("/")
    eks.delete_addon(aws, region, cluster, name)


Deleter = Callable[[AppContext, dict[str, Any]], bool]


def _delete_share(app: AppContext, res: dict[str, Any]) -> bool:
    return delete_share(app.aws, app.db, res)


def _delete_hyperpod(app: AppContext, res: dict[str, Any]) -> bool:
    if not check_hyperpod_cluster(app, res, res["clusterTag"]):  # gone already: see _delete_eks_cluster
        return True
    hyperpod.delete_cluster(app.aws, res["region"], res["resourceId"])
    return False


def _delete_internet_gateway(app: AppContext, res: dict[str, Any]) -> bool:
    """The cluster's internet gateway, unless route tables that are not the cluster's route through it (in a reused
    VPC: the operator's, or another cluster's that found it attached): detaching it would cut their traffic off,
    so it stays, attached and tagged, and the log says why. The cluster's own tables are deleted before it."""
    region, igw_id = res["region"], res["resourceId"]
    routing = ec2_network.route_tables_via_gateway(app.aws, region, igw_id)
    others = [t["RouteTableId"] for t in routing if not tagged([t], res["clusterTag"])]
    if others:
        log.warning("internet gateway %s kept: route tables %s route through it", igw_id, ", ".join(others))
        return True
    ec2_network.delete_internet_gateway(app.aws, region, igw_id)
    return True


# ledger resource type → how to start deleting it; True when it is gone already (no waiting needed)
DELETERS: dict[str, Deleter] = {
    "sagemaker:cluster": _delete_hyperpod,
    "k8s:loadbalancer-service": _delete_lb_service,
    "eks:cluster": _delete_eks_cluster,
    "eks:addon": _deleter(_delete_addon, True),
    "eks:pod-identity-association": _delete_pod_identity,
    "iam:role": _deleter(iam.delete_role, True),
    "aps:workspace": _deleter(amp.delete_workspace, True),
    "grafana:workspace": _deleter(grafana.delete_workspace, True),
    "sagemaker:mlflow-tracking-server": _deleter(mlflow.delete_server, True),
    "iam:oidc-provider": delete_oidc_provider,
    "ec2:nat-gateway": _deleter(ec2_network.delete_nat_gateway, False),
    "ec2:elastic-ip": _deleter(ec2_network.release_address, True),
    "ec2:vpc-endpoint": _deleter(ec2_network.delete_vpc_endpoint, True),
    "ec2:route-table": _deleter(ec2_network.delete_route_table, True),
    "ec2:internet-gateway": _delete_internet_gateway,
    "ec2:subnet": _deleter(ec2_network.delete_subnet, True),
    "ec2:security-group": _deleter(ec2_network.delete_security_group, True),
    "ec2:vpc": _deleter(ec2_network.delete_vpc, True),
    "s3:prefix": _delete_share,
    "s3:bucket": _delete_share,
    "elbv2:load-balancer": _deleter(elbv2.delete_load_balancer, True),
    "fsx:file-system": fsx_delete.delete_for_cluster,
}


def delete_one(app: AppContext, res: dict[str, Any]) -> bool:
    """Start deleting one resource; True when it is gone already (no waiting needed)."""
    deleter = DELETERS.get(res["resourceType"])
    if deleter is None:
        raise Unsupported(f"No deleter for {res['resourceType']}; delete {res['resourceId']} by hand.", retryable=True)
    return deleter(app, res)


def still_there(app: AppContext, res: dict[str, Any]) -> bool:
    """Whether a resource whose deletion was started still exists (the kinds that take time to go)."""
    kind, rid, region = res["resourceType"], res["resourceId"], res["region"]
    try:
        if kind == "k8s:loadbalancer-service":
            namespace, name = rid.split("/", 1)
            row = _row_of(app, res)
            api = kube_api(app.kube, row.eks_cluster_name, row.region)
            kube_call(f"read Service {rid}", core_kinds.read_service, api, name=name, namespace=namespace)
            return True
        if kind == "sagemaker:cluster":
            return hyperpod.cluster_status(app.aws, region, rid) not in (None, "Deleted")
        if kind == "eks:cluster":
            return eks.describe_cluster(app.aws, region, rid) is not None
        if kind == "ec2:nat-gateway":
            return ec2_network.nat_gateway_state(app.aws, region, rid) not in (None, "deleted")
        if kind == "fsx:file-system":
            return fsx_delete.still_there(app, res)
    except Exception as exc:
        if is_gone(exc):
            return False
        raise
    return False
