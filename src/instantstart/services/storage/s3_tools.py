"""S3 storage tools of the active cluster: defaults, create a claim (bucket + optional prefix), list its contents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from instantstart.aws import identity, s3
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import PreconditionFailed
from instantstart.manifests import iam_policies as pol
from instantstart.manifests import storage as storage_manifests
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.params import StorageParams, StorageSpecParams, stored
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.storage.s3_claims import (
    active_cluster,
    bucket_region,
    claim_source,
    default_bucket,
    storage_spec,
)
from instantstart.validation import KubeName, Region

LIST_MAX_KEYS = 1000


class StorageDefaults(WireModel):
    """What s3_storage_create does when given nothing."""

    cluster_tag: str
    name: str = Field(description="Claim name (namespace default).")
    namespace: str
    bucket_name: str = Field(description="The project bucket; the CSI driver's role is scoped to its data prefix.")
    bucket_exists: bool
    region: str
    prefix: str | None = Field(
        default=None,
        description="The cluster's data prefix clusters/<tag>/data/ of the project bucket (the only part its pods"
        " may write; a claim's own prefix goes below it).",
    )
    driver: str
    persistent_volume_name: str
    access_modes: list[str]
    mount_options: list[str]


class StorageCreateRequest(WireModel):
    """A claim on an S3 bucket (and optionally a prefix of it) for the active cluster."""

    name: KubeName = Field(default=storage_manifests.DEFAULT_CLAIM, description="Claim name; the PV is <name>-pv.")
    bucket_name: str | None = Field(
        default=None, description="Default: the project bucket. Another bucket only when named here; it must exist."
    )
    region: Region | None = Field(default=None, description="The bucket's Region (default: where it is).")
    prefix: str | None = Field(
        default=None, description="Key prefix the claim is confined to (e.g. team-a/); pods see it as the root."
    )


class ListContentsRequest(WireModel):
    """Which storage to list, under which prefix, and which page."""

    storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The claim name given to s3_storage_create."
    )
    prefix: str | None = Field(default=None, description="Key prefix below the volume's own prefix.")
    max_keys: int = Field(default=LIST_MAX_KEYS, ge=1, le=LIST_MAX_KEYS, description="Page size, 1-1000.")
    continuation_token: str | None = Field(
        default=None, description="nextContinuationToken of the previous page, to read the next one."
    )


class S3Object(WireModel):
    """One object of the bucket."""

    key: str
    path: str = Field(description="The path inside the mounted volume.")
    size: int
    last_modified: datetime | None


class ListContentsResult(WireModel):
    """One page of one level of the claim below the prefix (folders as commonPrefixes)."""

    storage: str
    bucket_name: str
    prefix: str = Field(description="The key prefix listed in the bucket (the claim's prefix + the one asked).")
    path: str = Field(default="", description="The folder listed, relative to the claim (what pods see).")
    objects: list[S3Object]
    common_prefixes: list[str] = Field(
        description="Sub-folders, relative to the claim like each object's path; pass one as prefix to open it."
    )
    count: int
    truncated: bool
    next_continuation_token: str | None = Field(
        default=None, description="Pass as continuationToken for the next page; absent on the last page."
    )


@operation("s3_storage_get_defaults", method="GET", path="/storage/s3/defaults", example={})
async def s3_storage_get_defaults(ctx: CallContext, req: NoInput) -> StorageDefaults:
    """What s3_storage_create uses when given nothing, for the active cluster: claim s3-claim in namespace
    default, the project bucket and its Region, the cluster's data prefix (the Mountpoint CSI driver's role
    may write only there), the driver, access mode ReadWriteMany and the mount options. Needs an active cluster."""
    row = await active_cluster(ctx)
    bucket = await blocking(default_bucket, ctx.app, row)
    where = await blocking(bucket_region, ctx.app, bucket, row.region)
    region = where or row.region
    return StorageDefaults(
        cluster_tag=row.tag,
        name=storage_manifests.DEFAULT_CLAIM,
        namespace=storage_manifests.DEFAULT_NAMESPACE,
        bucket_name=bucket,
        bucket_exists=where is not None,
        region=region,
        prefix=pol.data_prefix(row.tag),
        driver=storage_manifests.S3_CSI_DRIVER,
        persistent_volume_name=storage_manifests.pv_name(storage_manifests.DEFAULT_CLAIM),
        access_modes=["ReadWriteMany"],
        mount_options=storage_manifests.mount_options(region),
    )


@operation(
    "s3_storage_create",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/storage/s3",
    completion="operation_get",
    example={"name": "s3-claim"},
)
async def s3_storage_create(ctx: CallContext, req: StorageCreateRequest) -> OperationRef:
    """Mount an S3 bucket (or a prefix of it) into the active cluster: a static PersistentVolume <name>-pv
    for the Mountpoint for S3 CSI driver (ReadWriteMany) and the claim <name> (namespace default) bound to
    it. Several claims per cluster, each under its own name. The bucket defaults to the project bucket;
    another bucket is used only when named in bucketName, must exist and must not be a project bucket (of any
    cluster or Region; INVALID_INPUT); region, when given, must be the bucket's. The EKS stage must be done.
    Re-running with the same values is a no-op; an existing claim or volume of that name with other values is
    refused (CONFLICT). Pods mount it once the S3 CSI driver is
    installed (cluster_configure_dependencies); storage_list shows it."""
    row = await active_cluster(ctx)
    if (row.stages or {}).get("eks") != "SUCCEEDED" and not row.imported:
        raise PreconditionFailed(
            f"The EKS stage of cluster {row.tag} has not finished.",
            hint="Wait for cluster_get_eks_creation_status to report SUCCEEDED, then retry.",
        )
    given = {"name": req.name, "bucketName": req.bucket_name, "region": req.region, "prefix": req.prefix}
    spec = await blocking(storage_spec, ctx.app, row, given)
    params = StorageParams(
        cluster_tag=row.tag,
        region=row.region,
        storage=StorageSpecParams.model_validate({k: v for k, v in spec.items() if v}),
    )
    return await submit_for_cluster(
        ctx,
        "s3_storage_create",
        row.tag,
        stored(params),
        status_tool="operation_get",
        poll_after_seconds=5,
    )


def list_page(app: AppContext, bucket: str, region: str, prefix: str, limit: int, token: str | None) -> dict[str, Any]:
    """One ListObjectsV2 page (delimiter '/') of the bucket below `prefix` (blocking)."""
    page = s3.list_objects(app.aws, region, bucket, prefix, limit, identity.account_id(app.aws, region), token)
    return {
        "objects": [
            {"key": o["Key"], "size": int(o.get("Size", 0)), "lastModified": o.get("LastModified")}
            for o in page.get("Contents") or []
        ],
        "commonPrefixes": [c["Prefix"] for c in page.get("CommonPrefixes") or []],
        "truncated": bool(page.get("IsTruncated")),
        "next": page.get("NextContinuationToken"),
    }


@operation("s3_storage_list_contents", method="GET", path="/storage/s3/contents", example={"storage": "s3-claim"})
async def s3_storage_list_contents(ctx: CallContext, req: ListContentsRequest) -> ListContentsResult:
    """List one level of the S3 storage `storage` (default s3-claim) of the active cluster: objects with
    size and time, and sub-folders as commonPrefixes, below `prefix` (relative to the claim's own prefix,
    so paths match what pods see under the mount; object paths and commonPrefixes are relative the same
    way). One page of at most maxKeys (≤ 1000) entries; when
    `truncated`, pass nextContinuationToken as continuationToken for the next page. Cached a few seconds."""
    row = await active_cluster(ctx)
    prefix = storage_manifests.validate_prefix(req.prefix) if req.prefix else ""

    async def source() -> dict[str, Any]:
        return await blocking(claim_source, ctx.app, row, req.storage)

    src: dict[str, Any] = await ctx.app.cache.get(f"storage:{row.tag}:{req.storage}:source", source)
    base = src["prefix"] or ""
    full = base + prefix

    async def fetch() -> dict[str, Any]:
        return await blocking(
            list_page, ctx.app, src["bucketName"], src["region"], full, req.max_keys, req.continuation_token
        )

    key = f"s3:{src['region']}:{src['bucketName']}:list:{full}:{req.max_keys}:{req.continuation_token or ''}"
    page: dict[str, Any] = await ctx.app.cache.get(key, fetch)
    objects = [
        S3Object(key=o["key"], path=o["key"][len(base) :], size=o["size"], last_modified=o["lastModified"])
        for o in page["objects"]
    ]
    return ListContentsResult(
        storage=req.storage,
        bucket_name=src["bucketName"],
        prefix=full,
        path=prefix,
        objects=objects,
        common_prefixes=[p[len(base) :] for p in page["commonPrefixes"]],
        count=len(objects),
        truncated=page["truncated"],
        next_continuation_token=page["next"],
    )
