"""S3 claims: bucket look-ups, the Mountpoint for S3 CSI PV and claim (adopt or create), the storage stage and kind."""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from instantstart.aws import identity, s3
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import Conflict, InvalidInput, NotFound
from instantstart.kube import core_kinds
from instantstart.kube.apply import FIELD_MANAGER
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api, api_status
from instantstart.manifests import fsx as fsx_m
from instantstart.manifests import iam_policies as pol
from instantstart.manifests import storage as storage_m
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.params import StorageParams
from instantstart.services.base.registry import get_cluster, mirror_pipeline_stages, record_details, resolve_tag
from instantstart.services.core.project_bucket import project_bucket_reason, remembered_bucket
from instantstart.services.core.stages import project_bucket
from instantstart.services.storage.claim_iam import widen_csi_role
from instantstart.store.models import ClusterRow

APPLY = "application/apply-patch+yaml"
BIND_TIMEOUT = 300


# -- bucket look-ups ------------------------------------------------------------------------------------


def default_bucket(app: AppContext, row: ClusterRow) -> str:
    """The cluster's project bucket: as recorded by the EKS stage, else configured, else the one this
    installation made in the Region, else the legacy convention."""
    recorded = facts_of(row).bucket
    if recorded:
        return str(recorded)
    if app.settings.project_bucket:
        return app.settings.project_bucket
    remembered = remembered_bucket(app.db, row.region)
    if remembered:
        return remembered
    account = identity.account_id(app.aws, row.region)
    return f"instantstart-{account}-{row.region}"


def bucket_region(app: AppContext, bucket: str, region: str) -> str | None:
    """The Region a bucket is in; None when it does not exist."""
    return s3.bucket_region(app.aws, region, bucket, identity.account_id(app.aws, region))


def storage_spec(app: AppContext, row: ClusterRow, given: dict[str, Any], *, field_prefix: str = "") -> dict[str, Any]:
    """Validated {name, bucketName, region, prefix}; the bucket must exist (blocking; raises InvalidInput/NotFound)."""
    name = storage_m.validate_claim_name(given.get("name") or storage_m.DEFAULT_CLAIM, f"{field_prefix}name")
    bucket = storage_m.validate_bucket_name(
        given.get("bucketName") or default_bucket(app, row), f"{field_prefix}bucketName"
    )
    prefix = storage_m.validate_prefix(given["prefix"], f"{field_prefix}prefix") if given.get("prefix") else None
    own = facts_of(row).bucket or default_bucket(app, row)
    if not given.get("bucketName") or bucket == own:
        # The shared project bucket: only this cluster's data prefix (the CSI role may write nowhere else).
        data = pol.data_prefix(row.tag)
        prefix = data if not prefix else prefix if prefix.startswith(data) else f"{data}{prefix}"
    where = bucket_region(app, bucket, given.get("region") or row.region)
    if where is None:
        raise NotFound(
            f"The S3 bucket {bucket!r} does not exist.",
            hint="Give an existing bucket in bucketName, or omit it for the project bucket (the EKS stage makes it).",
            details={"fields": [{"field": f"{field_prefix}bucketName", "message": "no such bucket"}]},
        )
    if bucket != own:
        refuse_project_bucket(app, where, bucket, f"{field_prefix}bucketName")
    if given.get("region") and given["region"] != where:
        field = f"{field_prefix}region"
        raise InvalidInput(
            f"Invalid input: {field}: bucket {bucket} is in {where}, not {given['region']}",
            details={"fields": [{"field": field, "message": f"the bucket is in {where}"}]},
        )
    return {"name": name, "bucketName": bucket, "region": where, "prefix": prefix}


def refuse_project_bucket(app: AppContext, region: str, bucket: str, field: str) -> None:
    """InvalidInput when `bucket` is another project bucket (of any cluster, installation or Region): a claim
    grants write on bucket/prefix, and a project bucket holds the lifecycle scripts nodes run as root."""
    why = project_bucket_reason(app.aws, app.db, app.settings, region, bucket)
    if why is None:
        return
    raise InvalidInput(
        f"Invalid input: {field}: s3://{bucket} is a project bucket ({why}); its lifecycle scripts run as root "
        "on HyperPod nodes, so no claim may mount it.",
        hint="Omit bucketName to mount this cluster's own data prefix, or name a bucket that holds only data "
        "(not named instantstart-<account>-<region>…, not tagged instantstart:installation).",
        details={"fields": [{"field": field, "message": "a project bucket cannot be claimed"}]},
    )


# -- Kubernetes objects: look first, adopt what matches, create the rest by server-side apply --------------


def read_object(api: Api, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        if kind == "PersistentVolume":
            return core_kinds.read_volume(api, name)
        return core_kinds.read_claim(api, name, namespace)
    except Exception as exc:
        if api_status(exc) == 404:
            return None
        raise


def _apply(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    name = body["metadata"]["name"]
    kw: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": APPLY}
    if body["kind"] == "PersistentVolume":
        return core_kinds.patch_volume(api, name, body, **kw)
    return core_kinds.patch_claim(api, name, body["metadata"]["namespace"], body, **kw)


def ensure_object(api: Api, desired: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Adopt a matching existing PV/PVC untouched, refuse a conflicting one, else create it by server-side
    apply (field manager "instantstart"). Returns (object, created). Blocking."""
    kind, md = desired["kind"], desired["metadata"]
    action = f"ensure {kind} {md['name']}"
    found = kube_call(action, read_object, api, kind, md["name"], md.get("namespace", ""))
    if found is not None:
        fsx_pv = ((desired.get("spec") or {}).get("csi") or {}).get("driver") == fsx_m.FSX_CSI_DRIVER
        differ = (fsx_m.pv_differences if fsx_pv else storage_m.pv_differences) if kind == "PersistentVolume" else None
        problems = differ(found, desired) if differ else storage_m.pvc_differences(found, desired)
        if problems:
            raise Conflict(
                f"{kind} {md['name']} already exists and differs: {'; '.join(problems)}.",
                hint="Choose another storage name, or delete the existing object if nothing uses it.",
            )
        return found, False
    return kube_call(action, _apply, api, desired), True


def claim_phase(api: Api, name: str, namespace: str) -> str:
    """The claim's phase (blocking)."""
    found = kube_call(f"read claim {name}", read_object, api, "PersistentVolumeClaim", name, namespace)
    return str(((found or {}).get("status") or {}).get("phase") or "Missing")


def csi_driver_installed(api: Api, driver: str = storage_m.S3_CSI_DRIVER) -> bool:
    """Whether the CSIDriver object `driver` (default: Mountpoint for S3) exists (blocking)."""
    try:
        core_kinds.read_csi_driver(api, driver)
        return True
    except Exception as exc:
        if api_status(exc) == 404:
            return False
        raise


# -- the storage stage ------------------------------------------------------------------------------------


async def stage_storage(stage: StageContext) -> dict[str, Any]:
    """PV for the Mountpoint S3 CSI driver on the bucket, and the claim bound to it (waited for); the
    cluster row's stage "storage" follows this stage (the engine mirrors it)."""
    p = stage.params_as(StorageParams)
    tag, app = p.cluster_tag, stage.app
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    given: dict[str, Any] = p.storage.model_dump(by_alias=True, exclude_none=True) if p.storage else {}
    if not given.get("bucketName") and not facts_of(row).bucket:
        given["bucketName"] = await blocking(project_bucket, stage, p.region or row.region, tag)
    try:
        spec = await blocking(storage_spec, app, row, given, field_prefix="storage.")
    except (InvalidInput, NotFound):
        raise
    name, namespace = spec["name"], storage_m.DEFAULT_NAMESPACE
    api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
    driver = await blocking(kube_call, "read CSIDriver", csi_driver_installed, api)
    if not driver:
        await stage.progress(
            f"note: CSIDriver {storage_m.S3_CSI_DRIVER} is not installed yet; the claim binds but pods cannot mount it "
            "until cluster_configure_dependencies installs the Mountpoint for S3 CSI driver"
        )
    pv = storage_m.build_pv(
        cluster_tag=tag,
        claim=name,
        bucket=spec["bucketName"],
        region=spec["region"],
        namespace=namespace,
        prefix=spec["prefix"],
    )
    pvc = storage_m.build_pvc(cluster_tag=tag, claim=name, namespace=namespace)
    widened = await blocking(widen_csi_role, app, row, name, spec)
    if widened:
        await stage.progress(f"IAM role {widened}: also s3://{spec['bucketName']}/{spec['prefix'] or ''} (this claim)")
    await stage.progress(f"PersistentVolume {storage_m.pv_name(name)} on s3://{spec['bucketName']} ({spec['region']})")
    _, pv_created = await blocking(ensure_object, api, pv)
    await stage.progress(f"PersistentVolumeClaim {namespace}/{name}")
    _, pvc_created = await blocking(ensure_object, api, pvc)
    app.cache.invalidate(f"kube:{row.region}:{row.eks_cluster_name}:pvcs")

    async def bound() -> tuple[bool, str]:
        phase = await blocking(claim_phase, api, name, namespace)
        return phase == "Bound", f"claim {namespace}/{name}: {phase}"

    await wait_until(stage, bound, limit_seconds=BIND_TIMEOUT, what=f"claim {namespace}/{name}")
    app.cache.invalidate(f"kube:{row.region}:{row.eks_cluster_name}:pvcs")  # status shows it Bound at once
    record = {
        "namespace": namespace,
        "persistentVolume": storage_m.pv_name(name),
        "bucketName": spec["bucketName"],
        "region": spec["region"],
        "prefix": spec["prefix"],
        "driver": storage_m.S3_CSI_DRIVER,
        "csiDriverInstalled": driver,
    }
    storage_all = {**facts_of(row).storage, name: record}
    await record_details(stage, tag, storage=storage_all)
    return {"claim": name, **record, "created": {"persistentVolume": pv_created, "claim": pvc_created}}


STORAGE_STAGE = StageSpec("storage", stage_storage, max_attempts=5, timeout_seconds=BIND_TIMEOUT + 300)
KINDS.register(
    OperationKind(
        name="s3_storage_create", params=StorageParams, stages=(STORAGE_STAGE,), mirror=mirror_pipeline_stages
    )
)


async def active_cluster(ctx: CallContext) -> ClusterRow:
    """The active cluster's row (PRECONDITION_FAILED when none is active)."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, None)
    return await to_thread.run_sync(get_cluster, ctx.app.db, tag)


# -- reading a claim's source ---------------------------------------------------------------------------


def claim_source(app: AppContext, row: ClusterRow, claim: str) -> dict[str, Any]:
    """The bucket, Region and prefix behind a claim: from Kubernetes (claim → PV), else the recorded storage."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pvc = kube_call(
        f"read claim {claim}", read_object, api, "PersistentVolumeClaim", claim, storage_m.DEFAULT_NAMESPACE
    )
    volume = ((pvc or {}).get("spec") or {}).get("volumeName")
    pv = kube_call(f"read volume {volume}", read_object, api, "PersistentVolume", volume, "") if volume else None
    if pv is not None and storage_m.pv_source(pv)["driver"] == storage_m.S3_CSI_DRIVER:
        source = storage_m.pv_source(pv)
        return {"bucketName": source["bucket"], "region": source["region"] or row.region, "prefix": source["prefix"]}
    recorded = facts_of(row).storage.get(claim)
    if pvc is None and recorded:
        return {"bucketName": recorded["bucketName"], "region": recorded["region"], "prefix": recorded.get("prefix")}
    raise NotFound(
        f"No S3 storage named {claim!r} in cluster {row.tag}"
        + (" (the claim exists but is not an S3 CSI volume)." if pvc is not None else "."),
        hint="Create it with s3_storage_create; cluster_get_status lists the cluster's claims.",
        details={"fields": [{"field": "storage", "message": "unknown S3 storage"}]},
    )
