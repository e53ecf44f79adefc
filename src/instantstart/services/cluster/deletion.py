"""Cluster deletion: a plan first (ordered, from the ledger plus a tag scan for orphans), then its execution."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.errors import error_code, translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import Conflict
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec, TemporaryError
from instantstart.operations.models import OperationRef
from instantstart.operations.runner import StageContext
from instantstart.services.cluster.network import tagged
from instantstart.services.core.ledger import TAG_CLUSTER, mark_deleted, resources_of
from instantstart.services.core.registry import ACTIVE_CLUSTER_KEY, get_cluster, submit_for_cluster
from instantstart.services.core.stages import blocking, wait_until
from instantstart.store.models import ClusterRow, ResourceRow, StateRow

log = logging.getLogger(__name__)

# Deletion order: what holds other things goes first (load balancers and Kubernetes-owned AWS resources,
# then HyperPod, then EKS and its attachments, then identity, then the network from the edges inwards).
ORDER = [
    "k8s:loadbalancer-service",
    "elbv2:load-balancer",
    "sagemaker:cluster",
    "eks:pod-identity-association",
    "eks:addon",
    "eks:cluster",
    "iam:oidc-provider",
    "iam:role",
    "ec2:nat-gateway",
    "ec2:elastic-ip",
    "ec2:vpc-endpoint",
    "ec2:route-table",
    "ec2:internet-gateway",
    "ec2:subnet",
    "ec2:security-group",
    "ec2:vpc",
    "s3:bucket",
]
WAIT_LIMIT = 3600.0


class DeletionPlanRequest(WireModel):
    """Which cluster to plan the deletion of."""

    cluster_tag: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
    delete_bucket: bool = Field(default=False, description="Also empty and delete the project bucket.")


class PlannedResource(WireModel):
    """One resource the deletion will remove, in order."""

    order: int
    resource_type: str
    resource_id: str
    region: str
    source: str = Field(description="ledger (created by this control plane) or tag (found by its tags)")
    keep: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


class DeletionPlan(WireModel):
    """The ordered deletion plan and the digest cluster_delete must be given to execute it."""

    cluster_tag: str
    imported: bool
    resources: list[PlannedResource]
    kept: list[PlannedResource]
    plan_digest: str
    note: str


class DeleteRequest(WireModel):
    """Execute the deletion plan whose digest cluster_delete_plan returned."""

    cluster_tag: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
    plan_digest: str = Field(pattern=r"^[0-9a-f]{16}$", description="From cluster_delete_plan.")
    delete_bucket: bool = False


def _rank(resource_type: str) -> int:
    return ORDER.index(resource_type) if resource_type in ORDER else ORDER.index("iam:oidc-provider")


def _tag_scan(app: AppContext, row: ClusterRow) -> list[tuple[str, str]]:
    """Network resources carrying the cluster tag (orphans a crash may have left out of the ledger).
    Tags are checked on each item as well as asked of EC2 (see network.tagged)."""
    ec2 = app.aws.client("ec2", row.region)
    f = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [row.tag]}]

    def mine(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tagged(items, row.tag)

    found: list[tuple[str, str]] = []
    found += [("ec2:vpc", v["VpcId"]) for v in mine(ec2.describe_vpcs(Filters=f)["Vpcs"])]
    found += [("ec2:subnet", s["SubnetId"]) for s in mine(ec2.describe_subnets(Filters=f)["Subnets"])]
    found += [
        ("ec2:nat-gateway", n["NatGatewayId"])
        for n in mine(ec2.describe_nat_gateways(Filters=f)["NatGateways"])
        if n.get("State") not in ("deleted", "deleting")
    ]
    found += [("ec2:route-table", t["RouteTableId"]) for t in mine(ec2.describe_route_tables(Filters=f)["RouteTables"])]
    found += [
        ("ec2:internet-gateway", g["InternetGatewayId"])
        for g in mine(ec2.describe_internet_gateways(Filters=f)["InternetGateways"])
    ]
    found += [
        ("ec2:security-group", g["GroupId"]) for g in mine(ec2.describe_security_groups(Filters=f)["SecurityGroups"])
    ]
    found += [("ec2:elastic-ip", a["AllocationId"]) for a in mine(ec2.describe_addresses(Filters=f)["Addresses"])]
    found += [
        ("ec2:vpc-endpoint", e["VpcEndpointId"])
        for e in mine(ec2.describe_vpc_endpoints(Filters=f)["VpcEndpoints"])
        if e.get("State", "").lower() not in ("deleted", "deleting")
    ]
    return found


def _load_balancer_holders(app: AppContext, row: ClusterRow) -> list[tuple[str, str]]:
    """Kubernetes Services of type LoadBalancer (their controller owns AWS load balancers) and the ELBv2
    load balancers tagged for this EKS cluster; empty when the cluster or its API is gone."""
    from kubernetes import client as k8s

    found: list[tuple[str, str]] = []
    try:
        api = app.kube.api_client(row.eks_cluster_name, row.region)
        services = k8s.CoreV1Api(api).list_service_for_all_namespaces().items
        found += [
            ("k8s:loadbalancer-service", f"{svc.metadata.namespace}/{svc.metadata.name}")
            for svc in services
            if svc.spec and svc.spec.type == "LoadBalancer" and svc.metadata
        ]
    except Exception:
        log.info("deletion plan: Kubernetes API of %s not reachable; no Services listed", row.eks_cluster_name)
    elbv2 = app.aws.client("elbv2", row.region)
    arns = [
        lb["LoadBalancerArn"]
        for page in elbv2.get_paginator("describe_load_balancers").paginate()
        for lb in page.get("LoadBalancers", [])
    ]
    for start in range(0, len(arns), 20):
        for description in elbv2.describe_tags(ResourceArns=arns[start : start + 20]).get("TagDescriptions", []):
            tags = {t["Key"]: t["Value"] for t in description.get("Tags", [])}
            if tags.get("elbv2.k8s.aws/cluster") == row.eks_cluster_name or tags.get(TAG_CLUSTER) == row.tag:
                found.append(("elbv2:load-balancer", description["ResourceArn"]))
    return found


def build_plan(app: AppContext, tag: str, delete_bucket: bool) -> DeletionPlan:
    """Blocking: the ordered plan. Imported clusters only lose what this control plane created."""
    row = get_cluster(app.db, tag)
    ledger: list[ResourceRow] = resources_of(app.db, tag)
    items: dict[tuple[str, str], PlannedResource] = {}
    for res in ledger:
        keep = bool((res.details or {}).get("keep")) and not delete_bucket
        items[(res.resource_type, res.resource_id)] = PlannedResource(
            order=0,
            resource_type=res.resource_type,
            resource_id=res.resource_id,
            region=res.region,
            source="ledger",
            keep=keep,
            details=dict(res.details or {}),
        )
    if not row.imported:
        try:
            for kind, rid in [*_load_balancer_holders(app, row), *_tag_scan(app, row)]:
                items.setdefault(
                    (kind, rid),
                    PlannedResource(order=0, resource_type=kind, resource_id=rid, region=row.region, source="tag"),
                )
        except Exception as exc:
            raise translate(exc, "scan for resources tagged with the cluster") from exc
    ordered = sorted(items.values(), key=lambda r: (_rank(r.resource_type), r.resource_id))
    delete = [r.model_copy(update={"order": i + 1}) for i, r in enumerate(x for x in ordered if not x.keep)]
    kept = [r for r in ordered if r.keep]
    digest_source = json.dumps([[r.resource_type, r.resource_id] for r in delete], sort_keys=True)
    digest = hashlib.sha256(f"{tag}|{delete_bucket}|{digest_source}".encode()).hexdigest()[:16]
    note = (
        "Imported cluster: only resources this control plane created are deleted."
        if row.imported
        else "Everything created for this cluster is deleted in this order."
    )
    if kept:
        note += " The project bucket is kept (pass deleteBucket to remove it)."
    return DeletionPlan(
        cluster_tag=tag, imported=row.imported, resources=delete, kept=kept, plan_digest=digest, note=note
    )


@operation(
    "cluster_delete_plan", method="GET", path="/clusters/{clusterTag}/deletion-plan", example={"clusterTag": "demo"}
)
async def cluster_delete_plan(ctx: CallContext, req: DeletionPlanRequest) -> DeletionPlan:
    """The ordered list of what cluster_delete would remove (load balancers and HyperPod first, then EKS,
    IAM, and the network from the edges inwards) and its planDigest. Changes nothing."""
    return await to_thread.run_sync(build_plan, ctx.app, req.cluster_tag, req.delete_bucket)


@operation(
    "cluster_delete",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/clusters/{clusterTag}/delete",
    completion="operation_get",
    example={"clusterTag": "demo", "planDigest": "0000000000000000"},
)
async def cluster_delete(ctx: CallContext, req: DeleteRequest) -> OperationRef:
    """Delete a cluster by executing the plan from cluster_delete_plan: pass its planDigest (if what exists
    changed since, the call is refused with the new plan's digest). Deleting what is already gone is
    success; the project bucket is kept unless deleteBucket is true. Imported clusters keep what this
    control plane did not create."""
    current = await to_thread.run_sync(build_plan, ctx.app, req.cluster_tag, req.delete_bucket)
    replayed = await ctx.app.runner.replay(
        "cluster_delete", ctx.idempotency_key, status_tool="operation_get", poll_after_seconds=15
    )
    if replayed is not None:
        return replayed
    if current.plan_digest != req.plan_digest:
        raise Conflict(
            "The deletion plan changed since it was shown; review it again.",
            hint="Call cluster_delete_plan and pass its planDigest.",
            details={"planDigest": current.plan_digest},
        )
    params = {
        "clusterTag": req.cluster_tag,
        "deleteBucket": req.delete_bucket,
        "plan": [r.model_dump(by_alias=True) for r in current.resources],
    }
    return await submit_for_cluster(
        ctx, "cluster_delete", req.cluster_tag, params, status_tool="operation_get", poll_after_seconds=15
    )


def _gone(exc: BaseException) -> bool:
    if getattr(exc, "status", None) == 404:  # the Kubernetes API's NotFound
        return True
    code = error_code(exc)
    return code.endswith(("NotFound", "NotFoundException", "NoSuchEntity", "NoSuchBucket")) or code in (
        "ResourceNotFound",
        "InvalidAllocationID.NotFound",
        "InvalidVpcID.NotFound",
    )


def _delete_one(app: AppContext, res: dict[str, Any]) -> bool:
    """Start deleting one resource; True when it is gone already (no waiting needed)."""
    kind, rid, region = res["resourceType"], res["resourceId"], res["region"]
    aws = app.aws
    ec2 = aws.client("ec2", region)
    if kind == "sagemaker:cluster":
        aws.client("sagemaker", region).delete_cluster(ClusterName=rid)
        return False
    if kind == "k8s:loadbalancer-service":
        _core(app, res).delete_namespaced_service(name=rid.split("/", 1)[1], namespace=rid.split("/", 1)[0])
        return False
    if kind == "eks:cluster":
        eks = aws.client("eks", region)
        for addon in eks.list_addons(clusterName=rid).get("addons", []):
            eks.delete_addon(clusterName=rid, addonName=addon)
        eks.delete_cluster(name=rid)
        app.kube.forget(rid, region)
        return False
    if kind == "eks:addon":
        cluster, _, name = rid.partition("/")
        aws.client("eks", region).delete_addon(clusterName=cluster, addonName=name)
        return True
    if kind == "eks:pod-identity-association":
        cluster, _, assoc = rid.rpartition("/")
        cluster = cluster or str(res.get("details", {}).get("clusterName", ""))
        aws.client("eks", region).delete_pod_identity_association(clusterName=cluster, associationId=assoc)
        return True
    if kind == "iam:role":
        iam = aws.client("iam", region)
        for policy in iam.list_attached_role_policies(RoleName=rid)["AttachedPolicies"]:
            iam.detach_role_policy(RoleName=rid, PolicyArn=policy["PolicyArn"])
        for name in iam.list_role_policies(RoleName=rid)["PolicyNames"]:
            iam.delete_role_policy(RoleName=rid, PolicyName=name)
        iam.delete_role(RoleName=rid)
        return True
    if kind == "iam:oidc-provider":
        aws.client("iam", region).delete_open_id_connect_provider(OpenIDConnectProviderArn=rid)
        return True
    if kind == "ec2:nat-gateway":
        ec2.delete_nat_gateway(NatGatewayId=rid)
        return False
    if kind == "ec2:elastic-ip":
        ec2.release_address(AllocationId=rid)
        return True
    if kind == "ec2:vpc-endpoint":
        ec2.delete_vpc_endpoints(VpcEndpointIds=[rid])
        return True
    if kind == "ec2:route-table":
        table = ec2.describe_route_tables(RouteTableIds=[rid])["RouteTables"][0]
        for assoc in table.get("Associations", []):
            if not assoc.get("Main"):
                ec2.disassociate_route_table(AssociationId=assoc["RouteTableAssociationId"])
        ec2.delete_route_table(RouteTableId=rid)
        return True
    if kind == "ec2:internet-gateway":
        igw = ec2.describe_internet_gateways(InternetGatewayIds=[rid])["InternetGateways"][0]
        for attachment in igw.get("Attachments", []):
            ec2.detach_internet_gateway(InternetGatewayId=rid, VpcId=attachment["VpcId"])
        ec2.delete_internet_gateway(InternetGatewayId=rid)
        return True
    if kind == "ec2:subnet":
        ec2.delete_subnet(SubnetId=rid)
        return True
    if kind == "ec2:security-group":
        ec2.delete_security_group(GroupId=rid)
        return True
    if kind == "ec2:vpc":
        ec2.delete_vpc(VpcId=rid)
        return True
    if kind == "s3:bucket":
        s3 = aws.client("s3", region)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=rid):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=rid, Delete={"Objects": keys})
        s3.delete_bucket(Bucket=rid)
        return True
    if kind == "elbv2:load-balancer":
        aws.client("elbv2", region).delete_load_balancer(LoadBalancerArn=rid)
        return True
    raise TemporaryError(f"No deleter for {kind}; delete {rid} by hand.", code="UNSUPPORTED_RESOURCE")


def _core(app: AppContext, res: dict[str, Any]) -> Any:
    from kubernetes import client as k8s

    tag = res.get("details", {}).get("clusterTag") or res["clusterTag"]
    row = get_cluster(app.db, tag)
    return k8s.CoreV1Api(app.kube.api_client(row.eks_cluster_name, row.region))


def _still_there(app: AppContext, res: dict[str, Any]) -> bool:
    kind, rid, region = res["resourceType"], res["resourceId"], res["region"]
    try:
        if kind == "k8s:loadbalancer-service":
            namespace, name = rid.split("/", 1)
            _core(app, res).read_namespaced_service(name=name, namespace=namespace)
            return True
        if kind == "sagemaker:cluster":
            status = app.aws.client("sagemaker", region).describe_cluster(ClusterName=rid)["ClusterStatus"]
            return bool(status != "Deleted")
        if kind == "eks:cluster":
            app.aws.client("eks", region).describe_cluster(name=rid)
            return True
        if kind == "ec2:nat-gateway":
            nats = app.aws.client("ec2", region).describe_nat_gateways(NatGatewayIds=[rid])["NatGateways"]
            return bool(nats) and nats[0]["State"] not in ("deleted",)
    except Exception as exc:
        if _gone(exc):
            return False
        raise
    return False


async def stage_delete(stage: StageContext) -> dict[str, Any]:
    """Delete every planned resource in order, waiting for each that takes time; gone already is success."""
    app = stage.app
    tag = stage.params["clusterTag"]
    ledger = {(r.resource_type, r.resource_id): r.id for r in await blocking(resources_of, app.db, tag)}
    deleted = 0
    for planned in stage.params["plan"]:
        res = {**planned, "clusterTag": tag}
        label = f"{res['resourceType']} {res['resourceId']}"
        await stage.progress(f"deleting {label} ({res['order']}/{len(stage.params['plan'])})")
        try:
            immediate = await blocking(_delete_one, app, res)
        except Exception as exc:
            if not _gone(exc):
                code = error_code(exc)
                if code in ("DependencyViolation", "ResourceInUse", "ResourceInUseException", "DeleteConflict"):
                    raise TemporaryError(f"{label} is still in use ({code}); retrying.", code="DEPENDENCY") from exc
                raise translate(exc, f"delete {label}") from exc
            immediate = True
        if not immediate:

            async def gone(r: dict[str, Any] = res, what: str = label) -> tuple[bool, str]:
                there = await blocking(_still_there, app, r)
                return not there, f"waiting for {what} to go"

            await wait_until(stage, gone, limit_seconds=WAIT_LIMIT, what=f"deletion of {label}")
        row_id = ledger.get((res["resourceType"], res["resourceId"]))
        if row_id is not None:
            await blocking(mark_deleted, app.db, row_id)
        deleted += 1
    return {"deleted": deleted}


def _forget(app: AppContext, tag: str) -> None:
    with app.db.session() as session:
        row = session.get(ClusterRow, tag)
        if row is not None:
            session.delete(row)
        active = session.get(StateRow, ACTIVE_CLUSTER_KEY)
        if active is not None and active.value == tag:
            session.delete(active)


async def stage_forget(stage: StageContext) -> dict[str, Any]:
    """Remove the cluster from the registry (and from being active)."""
    await blocking(_forget, stage.app, stage.params["clusterTag"])
    stage.app.cache.invalidate()
    return {"forgotten": stage.params["clusterTag"]}


KINDS.register(
    OperationKind(
        name="cluster_delete",
        stages=(
            StageSpec(
                "delete",
                stage_delete,
                max_attempts=8,
                timeout_seconds=WAIT_LIMIT * 2,
                backoff_seconds=5,
                backoff_max_seconds=60,
            ),
            StageSpec("forget", stage_forget),
        ),
    )
)
