"""FSx for Lustre volumes: a file system in the cluster's compute subnet (or an existing one), its Lustre security
group, AVAILABLE waited for, then a static PV and claim for the FSx CSI driver; the fsx_storage_create tool."""

from __future__ import annotations

from typing import Any

from instantstart.aws import fsx as fsx_api
from instantstart.aws import vpc
from instantstart.catalog import operation
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed, ProviderError
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import fsx as fsx_manifests
from instantstart.manifests import storage as storage_manifests
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster, record_details
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_ROLE, aws_tags, record
from instantstart.services.storage.fsx_adopt import add_lustre_rules, check_adoptable
from instantstart.services.storage.fsx_params import FsxCreateRequest, FsxParams, lustre_options, read_cache
from instantstart.services.storage.s3_claims import active_cluster, claim_phase, csi_driver_installed, ensure_object
from instantstart.store.models import ClusterRow

KIND = "fsx_storage_create"
CREATE_TIMEOUT = 3600  # Lustre file systems take 5-15 minutes; large ones longer
BIND_TIMEOUT = 300
DRIVER_TIMEOUT = 900
TAG_STORAGE = "instantstart:storage"
FAILED_STATES = ("FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE", "DELETING")


def _role(name: str) -> str:
    return f"fsx-{name}"


def driver_hint(name: str) -> str:
    """How to get the FSx CSI driver onto the cluster."""
    return (
        "Enable it with hyperpod_update_advanced_features {\"fsxCsiDriver\": {\"enabled\": true}}, or call "
        f"fsx_storage_create again with enableCsiDriver: true (name {name}) to enable it in the same operation."
    )


# -- stage 2: the file system ---------------------------------------------------------------------------------


def ensure_security_group(app: AppContext, p: FsxParams, operation_id: str) -> str:
    """The claim's Lustre security group in the cluster's VPC (found by its tags, else created and ledgered),
    allowing TCP 988 and 1018-1023 from itself and from the cluster's node security group (blocking)."""
    assert p.vpc_id is not None
    role = _role(p.name)
    filters = [
        {"Name": "vpc-id", "Values": [p.vpc_id]},
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [p.cluster_tag]},
        {"Name": f"tag:{TAG_ROLE}", "Values": [role]},
    ]
    found = vpc.find_security_groups(app.aws, p.region, filters=filters)
    if found:
        group_id = str(found[0]["GroupId"])
    else:
        name = f"instantstart-{p.cluster_tag}-{role}"
        tags = [{"ResourceType": "security-group", "Tags": aws_tags(p.cluster_tag, operation_id, name, role,
                                                                      installation_id(app.db))}]
        group_id = vpc.create_security_group(
            app.aws, p.region, vpc_id=p.vpc_id, name=name,
            description=f"InstantStart cluster {p.cluster_tag}: Lustre (988, 1018-1023) for FSx volume {p.name}",
            tags=tags,
        )
        record(app.db, cluster_tag=p.cluster_tag, operation_id=operation_id, resource_type="ec2:security-group",
               resource_id=group_id, region=p.region, details={"storage": p.name})
    sources = [p.node_security_group_id] if p.node_security_group_id else []
    vpc.allow_lustre(app.aws, p.region, group_id, sources)
    return group_id


def create_file_system(app: AppContext, p: FsxParams, operation_id: str, group_id: str) -> dict[str, Any]:
    """Adopt the claim's file system when one tagged for it exists, else CreateFileSystem (idempotent by the
    operation's client token) and ledger it (blocking)."""
    assert p.subnet_id is not None
    for fs in fsx_api.tagged(app.aws, p.region, TAG_CLUSTER, p.cluster_tag):
        have = {t["Key"]: t["Value"] for t in fs.get("Tags") or []}
        if have.get(TAG_STORAGE) == p.name and fs.get("Lifecycle") not in ("DELETING", "FAILED"):
            return fs
    lustre: dict[str, Any] = {"DeploymentType": p.deployment_type, "DataCompressionType": p.data_compression_type}
    if p.per_unit_storage_throughput is not None:
        lustre["PerUnitStorageThroughput"] = p.per_unit_storage_throughput
    tiering = p.storage_type == fsx_manifests.INTELLIGENT_TIERING
    if tiering:
        lustre["ThroughputCapacity"] = p.throughput_capacity
        lustre["DataReadCacheConfiguration"] = p.read_cache
        lustre["MetadataConfiguration"] = {"Mode": "USER_PROVISIONED", "Iops": p.metadata_iops or 6000}
    tags = [*aws_tags(p.cluster_tag, operation_id, f"instantstart-{p.cluster_tag}-{p.name}",
                     installation=installation_id(app.db)),
            {"Key": TAG_STORAGE, "Value": p.name}]
    fs = fsx_api.create_lustre(
        app.aws, p.region, subnet_id=p.subnet_id, security_group_ids=[group_id],
        storage_capacity=None if tiering else p.storage_capacity,
        storage_type=p.storage_type, lustre=lustre, version=p.file_system_type_version, tags=tags,
        client_token=operation_id.replace("-", "")[:63],
    )
    record(app.db, cluster_tag=p.cluster_tag, operation_id=operation_id, resource_type="fsx:file-system",
           resource_id=str(fs["FileSystemId"]), region=p.region,
           details={"claim": p.name, "namespace": p.namespace, "securityGroupId": group_id})
    return fs


def file_system_view(fs: dict[str, Any]) -> dict[str, Any]:
    """The facts a claim needs from a FileSystem description."""
    lustre = fs.get("LustreConfiguration") or {}
    return {
        "fileSystemId": fs["FileSystemId"],
        "lifecycle": fs.get("Lifecycle"),
        "dnsName": fs.get("DNSName"),
        "mountName": lustre.get("MountName"),
        "storageCapacity": fs.get("StorageCapacity"),
        "storageType": fs.get("StorageType"),
        "throughputCapacity": lustre.get("ThroughputCapacity"),
        "deploymentType": lustre.get("DeploymentType"),
    }


async def stage_file_system(stage: StageContext) -> dict[str, Any]:
    """Create (or adopt) the Lustre file system and wait until it is AVAILABLE, reporting its lifecycle."""
    p = stage.params_as(FsxParams)
    app = stage.app
    group_id: str | None = None
    if p.file_system_id:
        fs = await blocking(fsx_api.describe, app.aws, p.region, p.file_system_id)
        if fs is None or fs.get("FileSystemType") != "LUSTRE":
            raise NotFound(
                f"No FSx for Lustre file system {p.file_system_id} in {p.region}.",
                hint="fsx_storage_list shows the cluster's file systems; check the id and Region.",
                details={"fields": [{"field": "fileSystemId", "message": "no such Lustre file system"}]},
                retryable=False,
            )
        created = False
        await stage.progress(f"adopting {p.file_system_id} ({fs.get('Lifecycle')})")
        if p.rules_group_id and p.node_security_group_id:
            await blocking(add_lustre_rules, app, p.region, p.rules_group_id, p.node_security_group_id)
            await stage.progress(
                f"security group {p.rules_group_id}: Lustre 988, 1018-1023 from {p.node_security_group_id} (added)"
            )
    else:
        group_id = await blocking(ensure_security_group, app, p, stage.operation_id)
        await stage.progress(f"security group {group_id}: Lustre 988, 1018-1023 from the cluster's nodes")
        fs = await blocking(create_file_system, app, p, stage.operation_id, group_id)
        created = True
        tiering = p.storage_type == fsx_manifests.INTELLIGENT_TIERING
        size = f"{p.throughput_capacity} MBps" if tiering else f"{p.storage_capacity} GiB"
        await stage.progress(f"file system {fs['FileSystemId']} ({p.deployment_type} {p.storage_type}, {size})")
    fs_id = str(fs["FileSystemId"])
    seen: dict[str, Any] = {"fs": fs}

    async def available() -> tuple[bool, str]:
        now = await blocking(fsx_api.describe, app.aws, p.region, fs_id)
        state = str((now or {}).get("Lifecycle") or "gone")
        if now is None or state in FAILED_STATES:
            reason = ((now or {}).get("FailureDetails") or {}).get("Message") or state
            raise ProviderError(
                f"FSx file system {fs_id} is {state}: {reason}",
                hint="Delete it (storage_delete) and retry in another subnet or later; check the FSx quotas.",
                retryable=False,
            )
        seen["fs"] = now
        return state == "AVAILABLE", f"file system {fs_id}: {state}"

    await wait_until(stage, available, limit_seconds=CREATE_TIMEOUT, what=f"FSx file system {fs_id}")
    view = file_system_view(seen["fs"])
    return {**view, "created": created, "securityGroupId": group_id, "lustreRulesAddedTo": p.rules_group_id}


# -- stage 3: the claim ---------------------------------------------------------------------------------------


async def stage_claim(stage: StageContext) -> dict[str, Any]:
    """Static PV (volumeHandle = file system id, dnsname, mountname) and the claim bound to it (waited for)."""
    p = stage.params_as(FsxParams)
    app = stage.app
    fs = stage.outputs["filesystem"]
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
    capacity = int(fs.get("storageCapacity") or p.storage_capacity)
    pv = fsx_manifests.build_pv(cluster_tag=p.cluster_tag, claim=p.name, file_system_id=fs["fileSystemId"],
                    dns_name=fs["dnsName"], mount_name=fs["mountName"], capacity_gib=capacity, namespace=p.namespace)
    pvc = fsx_manifests.build_pvc(cluster_tag=p.cluster_tag, claim=p.name, capacity_gib=capacity, namespace=p.namespace)
    await stage.progress(
        f"PersistentVolume {storage_manifests.pv_name(p.name)} on "
        f"{fsx_manifests.mount_target(fs['dnsName'], fs['mountName'])}"
    )
    _, pv_created = await blocking(ensure_object, api, pv)
    _, pvc_created = await blocking(ensure_object, api, pvc)
    app.cache.invalidate(f"kube:{row.region}:{row.eks_cluster_name}:pvcs")

    async def bound() -> tuple[bool, str]:
        phase = await blocking(claim_phase, api, p.name, p.namespace)
        return phase == "Bound", f"claim {p.namespace}/{p.name}: {phase}"

    await wait_until(stage, bound, limit_seconds=BIND_TIMEOUT, what=f"claim {p.namespace}/{p.name}")
    record_ = {"type": "fsx", "namespace": p.namespace, "persistentVolume": storage_manifests.pv_name(p.name),
               "fileSystemId": fs["fileSystemId"], "dnsName": fs["dnsName"], "mountName": fs["mountName"],
               "createdFileSystem": bool(fs.get("created")), "securityGroupId": fs.get("securityGroupId"),
               "driver": fsx_manifests.FSX_CSI_DRIVER}
    storage_all = {**facts_of(row).storage, p.name: record_}
    await record_details(stage, p.cluster_tag, storage=storage_all)
    return {"claim": p.name, **record_, "created": {"persistentVolume": pv_created, "claim": pvc_created}}


def network_of(row: ClusterRow, subnet_id: str | None) -> dict[str, Any]:
    """The subnet (given, else the cluster's compute subnet), VPC and node security group (PreconditionFailed
    when the cluster has no compute subnet yet and none is given)."""
    facts = facts_of(row)
    subnet = subnet_id or facts.any_compute_subnet
    if not subnet:
        raise PreconditionFailed(
            f"Cluster {row.tag} has no HyperPod compute subnet yet.",
            hint="Create the HyperPod cluster first (hyperpod_create), or give subnetId.",
        )
    return {"subnetId": subnet, "vpcId": facts.vpc_id, "securityGroupId": facts.security_group_id}


def check_subnet(app: AppContext, row: ClusterRow, net: dict[str, Any]) -> dict[str, Any]:
    """The subnet must exist (and be in the cluster's VPC when that is known); fills vpcId (blocking)."""
    from instantstart.aws import ec2_network

    try:
        subnet = ec2_network.describe_subnets(app.aws, row.region, [net["subnetId"]])[0]
    except (NotFound, InvalidInput, IndexError, ProviderError) as exc:
        raise InvalidInput(
            f"Invalid input: subnetId: subnet {net['subnetId']} does not exist in {row.region}",
            details={"fields": [{"field": "subnetId", "message": "no such subnet"}]},
        ) from exc
    if net.get("vpcId") and subnet["VpcId"] != net["vpcId"]:
        raise InvalidInput(
            f"Invalid input: subnetId: subnet {net['subnetId']} is in {subnet['VpcId']}, not the cluster's VPC "
            f"{net['vpcId']}",
            hint="Give a subnet of the cluster's VPC, or omit subnetId for the compute subnet.",
            details={"fields": [{"field": "subnetId", "message": "not in the cluster's VPC"}]},
        )
    return {**net, "vpcId": subnet["VpcId"]}


@operation(
    "fsx_storage_create",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/storage/fsx",
    completion="operation_get",
    example={"name": "fsx-claim", "deploymentType": "PERSISTENT_2", "storageCapacity": 1200},
)
async def fsx_storage_create(ctx: CallContext, req: FsxCreateRequest) -> OperationRef:
    """Add an FSx for Lustre volume to the active cluster: a new file system in the cluster's HyperPod compute
    subnet (or subnetId) with a security group allowing Lustre (TCP 988, 1018-1023) from the cluster's nodes,
    waited for until AVAILABLE, then a static PersistentVolume <name>-pv for the FSx CSI driver (dnsname,
    mountname) and the claim <name> (namespace default, ReadWriteMany). fileSystemId adopts an existing Lustre
    file system instead (never deleted by us); it must be in the cluster's VPC and its security groups must let
    the nodes in over Lustre, else refused naming the missing rules (allowLustreFromNodes: true adds them).
    Validated before anything is created: deploymentType SCRATCH_1|SCRATCH_2|PERSISTENT_1|PERSISTENT_2 (default
    PERSISTENT_2), storageType SSD|HDD|INTELLIGENT_TIERING (PERSISTENT_2 only, elastic: throughputCapacity a
    multiple of 4000 MBps, no storageCapacity), storageCapacity (SSD 1200, 2400, then +2400; SCRATCH_1
    +3600), perUnitStorageThroughput (PERSISTENT_2 125/250/500/1000,
    PERSISTENT_1 SSD 50/100/200, HDD 12/40; none for SCRATCH); a bad value is refused naming the allowed ones.
    Needs the fsxCsiDriver feature: refused with a hint when it is off, unless enableCsiDriver is true (then
    this operation enables it first). Everything created is tagged and ledgered: storage_delete removes the
    claim and the file system we created; cluster deletion removes both. Status: operation_get."""
    row = await active_cluster(ctx)
    if (row.stages or {}).get("eks") != "SUCCEEDED" and not row.imported:
        raise PreconditionFailed(
            f"The EKS stage of cluster {row.tag} has not finished.",
            hint="Wait for cluster_get_eks_creation_status to report SUCCEEDED, then retry.",
        )
    throughput, capacity = (None, req.storage_capacity) if req.file_system_id else lustre_options(req)
    net: dict[str, Any] = {}
    rules_group: str | None = None
    if req.file_system_id:  # in the cluster's VPC, reachable over Lustre from its nodes (or the rules asked for)
        adopt = await blocking(check_adoptable, ctx.app, row, req.file_system_id, add_rules=req.allow_lustre_from_nodes)
        net = {"vpcId": adopt["vpcId"], "securityGroupId": adopt["nodeSecurityGroupId"]}
        rules_group = adopt["rulesGroupId"]
    else:
        net = await blocking(check_subnet, ctx.app, row, network_of(row, req.subnet_id))
    if not req.enable_csi_driver:
        api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
        if not await blocking(kube_call, "read CSIDriver", csi_driver_installed, api, fsx_manifests.FSX_CSI_DRIVER):
            raise PreconditionFailed(
                f"The FSx for Lustre CSI driver ({fsx_manifests.FSX_CSI_DRIVER}) is not enabled on cluster {row.tag}.",
                hint=driver_hint(req.name),
            )
    params = FsxParams(
        cluster_tag=row.tag, region=row.region, name=req.name, namespace=storage_manifests.DEFAULT_NAMESPACE,
        file_system_id=req.file_system_id, deployment_type=req.deployment_type, storage_type=req.storage_type,
        storage_capacity=capacity, per_unit_storage_throughput=throughput,
        throughput_capacity=req.throughput_capacity if req.storage_type == fsx_manifests.INTELLIGENT_TIERING else None,
        read_cache=read_cache(req), metadata_iops=req.metadata_iops,
        data_compression_type=req.data_compression_type, file_system_type_version=req.file_system_type_version,
        subnet_id=net.get("subnetId"), vpc_id=net.get("vpcId"), node_security_group_id=net.get("securityGroupId"),
        enable_csi_driver=req.enable_csi_driver,
        rules_group_id=rules_group,
    )
    return await ctx.app.runner.submit(
        KIND,
        params,
        target=f"storage:{row.tag}:{req.name}",
        idempotency_key=ctx.idempotency_key,
        status_tool="operation_get",
        poll_after_seconds=15,
    )

