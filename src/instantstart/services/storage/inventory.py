"""Every storage claim of the active cluster (S3 and FSx CSI volumes) and deleting one that no pod mounts."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import Conflict, NotFound, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import api_status
from instantstart.manifests import storage as storage_m
from instantstart.manifests.fsx import FSX_CSI_DRIVER
from instantstart.manifests.labels import MANAGED_LABELS
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import record_facts
from instantstart.services.storage.claim_iam import narrow_csi_role
from instantstart.services.storage.fsx_delete import delete_created_file_system
from instantstart.services.storage.s3_claims import active_cluster, read_object
from instantstart.store.models import ClusterRow
from instantstart.validation import KubeName

DRIVERS = {storage_m.S3_CSI_DRIVER: "s3", FSX_CSI_DRIVER: "fsx"}
DONE_PHASES = ("Succeeded", "Failed")


class StorageClaim(WireModel):
    """One claim on an S3 or FSx for Lustre CSI volume."""

    name: str
    namespace: str
    type: str = Field(description="s3 or fsx.")
    persistent_volume: str
    phase: str = Field(description="The claim's phase (Bound, Pending, Lost) or Missing when only the PV exists.")
    bucket_name: str | None = None
    prefix: str | None = None
    region: str | None = None
    file_system_id: str | None = None
    mounted_by: list[str] = Field(description="namespace/name of each running or pending pod that mounts it.")


class StorageListResult(WireModel):
    """Every S3/FSx claim of the active cluster."""

    cluster_tag: str
    claims: list[StorageClaim]
    count: int


class StorageDeleteRequest(WireModel):
    """Which claim to delete."""

    name: KubeName = Field(description="The claim's name (storage_list shows them).")
    namespace: KubeName = Field(default=storage_m.DEFAULT_NAMESPACE, description="The claim's namespace.")
    keep_file_system: bool = Field(
        default=False, description="FSx only: keep the file system fsx_storage_create made (default: delete it)."
    )


class StorageDeleteResult(WireModel):
    """What was deleted (a bucket and its data are never touched; an FSx file system only when we created it)."""

    name: str
    namespace: str
    deleted_claim: bool
    deleted_persistent_volume: str | None
    bucket_name: str | None = Field(default=None, description="S3: the claim's bucket (kept, with its data).")
    narrowed_role: str | None = Field(
        default=None,
        description="S3: the CSI driver's IAM role whose policy no longer grants this claim's bucket/prefix (absent "
        "when another claim still needs it, or the claim was on the project bucket).",
    )
    file_system_id: str | None = Field(default=None, description="FSx: the claim's file system.")
    file_system_deletion: OperationRef | None = Field(
        default=None,
        description="FSx: the operation deleting the file system (and its security group) that fsx_storage_create "
        "made; absent when the file system was adopted or keepFileSystem was set.",
    )


def _mounts(pods: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(namespace, claim) → pods not yet finished that mount it."""
    found: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in DONE_PHASES:
            continue
        md = pod["metadata"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                found.setdefault((md["namespace"], claim), []).append(f"{md['namespace']}/{md['name']}")
    return found


def _claim_of(pv: dict[str, Any], pvcs: dict[str, dict[str, Any]], mounts: dict[tuple[str, str], list[str]]) -> Any:
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    ref = spec.get("claimRef") or {}
    if csi.get("driver") not in DRIVERS or not ref.get("name"):
        return None
    ns, name = ref.get("namespace", storage_m.DEFAULT_NAMESPACE), ref["name"]
    pvc = pvcs.get(f"{ns}/{name}")
    source = storage_m.pv_source(pv)
    is_s3 = csi["driver"] == storage_m.S3_CSI_DRIVER
    return StorageClaim(
        name=name,
        namespace=ns,
        type=DRIVERS[csi["driver"]],
        persistent_volume=pv["metadata"]["name"],
        phase=str(((pvc or {}).get("status") or {}).get("phase") or "Missing"),
        bucket_name=source["bucket"] if is_s3 else None,
        prefix=source["prefix"] if is_s3 else None,
        region=source["region"] if is_s3 else None,
        file_system_id=None if is_s3 else str(csi.get("volumeHandle") or ""),
        mounted_by=sorted(mounts.get((ns, name), [])),
    )


def read_claims(app: AppContext, row: ClusterRow) -> list[StorageClaim]:
    """Every S3/FSx CSI PV with its claim and the pods mounting it (blocking; three list calls)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pvs = wire.items(kube_call("list volumes", core_kinds.list_volumes, api))
    pvc_list = kube_call("list claims", core_kinds.list_claims, api)
    pvcs = {f"{wire.namespace(c)}/{wire.name(c)}": c for c in wire.items(pvc_list)}
    pods = wire.items(kube_call("list pods", core_kinds.list_pods, api, None))
    mounts = _mounts(pods)
    claims = [c for c in (_claim_of(pv, pvcs, mounts) for pv in pvs) if c is not None]
    return sorted(claims, key=lambda c: (c.namespace, c.name))


@operation("storage_list", method="GET", path="/storage", example={})
async def storage_list(ctx: CallContext, req: NoInput) -> StorageListResult:
    """Every storage claim of the active cluster, S3 (Mountpoint for S3 CSI) and FSx for Lustre: claim,
    namespace, type, volume, phase, bucket/prefix or file system, and the pods that mount it now."""
    row = await active_cluster(ctx)
    claims = await blocking(read_claims, ctx.app, row)
    return StorageListResult(cluster_tag=row.tag, claims=claims, count=len(claims))


def delete_claim(app: AppContext, row: ClusterRow, name: str, namespace: str) -> StorageDeleteResult:
    """Refuse while a pod mounts the claim, else delete the claim and its PV (blocking)."""
    claim = next((c for c in read_claims(app, row) if (c.name, c.namespace) == (name, namespace)), None)
    if claim is None:
        raise NotFound(
            f"No S3 or FSx storage claim {namespace}/{name} in cluster {row.tag}.",
            hint="storage_list shows the cluster's claims.",
            details={"fields": [{"field": "name", "message": "unknown storage claim"}]},
        )
    check_ours(app, row, claim)
    if claim.mounted_by:
        raise Conflict(
            f"Storage {namespace}/{name} is mounted by {len(claim.mounted_by)} pod(s): {', '.join(claim.mounted_by)}.",
            hint="Delete or finish those pods (their jobs or deployments), then retry storage_delete.",
            details={"pods": claim.mounted_by},
        )
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    deleted_claim = claim.phase != "Missing"
    if deleted_claim:
        kube_call(f"delete claim {namespace}/{name}", _delete_ignoring_404, core_kinds.delete_claim, api, name,
                  namespace)
    kube_call(
        f"delete volume {claim.persistent_volume}",
        _delete_ignoring_404,
        core_kinds.delete_volume,
        api,
        claim.persistent_volume,
    )
    return StorageDeleteResult(
        name=name,
        namespace=namespace,
        deleted_claim=deleted_claim,
        deleted_persistent_volume=claim.persistent_volume,
        bucket_name=claim.bucket_name,
        file_system_id=claim.file_system_id,
    )


def _foreign(kind: str, name: str, body: dict[str, Any] | None) -> str | None:
    """Why `body` is not one of ours (None when it is, or when it is gone)."""
    if body is None:
        return None
    labels = (body.get("metadata") or {}).get("labels") or {}
    key, value = next(iter(MANAGED_LABELS.items()))
    if labels.get(key) == value and labels.get(storage_m.LABEL_CLAIM):
        return None
    found = f"{key}={labels[key]}" if key in labels else f"no {key} label"
    return f"{kind} {name} has {found}"


def check_ours(app: AppContext, row: ClusterRow, claim: StorageClaim) -> None:
    """Refuse a claim InstantStart did not create (its PV or PVC lacks our managed-by and storage labels): it
    belongs to whoever made it, with whatever data and mounts they rely on (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pv = kube_call("read volume", read_object, api, "PersistentVolume", claim.persistent_volume, "")
    pvc = None
    if claim.phase != "Missing":
        pvc = kube_call("read claim", read_object, api, "PersistentVolumeClaim", claim.name, claim.namespace)
    problems = [p for p in (_foreign("PersistentVolume", claim.persistent_volume, pv),
                            _foreign("PersistentVolumeClaim", f"{claim.namespace}/{claim.name}", pvc)) if p]
    if problems:
        key, value = next(iter(MANAGED_LABELS.items()))
        raise PreconditionFailed(
            f"Storage {claim.namespace}/{claim.name} was not created by InstantStart ({'; '.join(problems)}; ours "
            f"carry {key}={value} and {storage_m.LABEL_CLAIM}), so storage_delete leaves it alone.",
            hint=f"If it is no longer needed, its owner deletes it: kubectl delete pvc {claim.name} -n "
            f"{claim.namespace}; kubectl delete pv {claim.persistent_volume}. To manage it here instead, adopt it "
            "with s3_storage_create or fsx_storage_create under the same name and source (that labels it).",
            details={"fields": [{"field": "name", "message": "not created by InstantStart"}]},
        )


def _delete_ignoring_404(fn: Any, *args: Any) -> None:
    try:
        fn(*args)  # the answer (object or Status) is not needed
    except Exception as exc:
        if api_status(exc) != 404:
            raise


@operation(
    "storage_delete",
    destructive=True,
    idempotent=False,
    method="POST",
    path="/storage/delete",
    completion="storage_list",
    example={"name": "s3-claim"},
)
async def storage_delete(ctx: CallContext, req: StorageDeleteRequest) -> StorageDeleteResult:
    """Delete a storage claim and its PersistentVolume from the active cluster. Refused (PRECONDITION_FAILED,
    naming what it found) for a claim InstantStart did not create, and (CONFLICT, naming the pods) while any
    unfinished pod mounts it. An S3 bucket and its data are kept. For an FSx claim whose
    file system fsx_storage_create made, the file system and its security group are deleted too (an
    operation: fileSystemDeletion, poll operation_get) unless keepFileSystem; an adopted one is kept. The S3
    CSI driver's IAM grant for a claim's bucket/prefix outside the project bucket goes with the last claim on it."""
    row = await active_cluster(ctx)
    result = await blocking(delete_claim, ctx.app, row, req.name, req.namespace)
    if result.file_system_id and not req.keep_file_system:
        ref = await delete_created_file_system(ctx, row, result.file_system_id)
        result = result.model_copy(update={"file_system_deletion": ref})
    recorded = dict(facts_of(row).storage)
    if recorded.pop(req.name, None) is not None:
        await blocking(record_facts, ctx.app.db, row.tag, storage=recorded)
    if result.bucket_name:
        # The S3 CSI role keeps exactly what the remaining claims need (the last claim on a bucket takes it).
        narrowed = await blocking(narrow_csi_role, ctx.app, row, recorded)
        result = result.model_copy(update={"narrowed_role": narrowed})
    ctx.app.cache.invalidate(f"kube:{row.region}:{row.eks_cluster_name}:pvcs")
    ctx.app.cache.invalidate(f"storage:{row.tag}:{req.name}:source")
    return result
