"""FSx for Lustre claims and file systems of the active cluster (fsx_storage_list)."""

from __future__ import annotations

from typing import Any

from instantstart.aws import fsx as fsx_api
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput
from instantstart.context import AppContext, CallContext
from instantstart.operations.waiting import blocking
from instantstart.services.core.ledger import TAG_CLUSTER
from instantstart.services.storage.fsx_delete import created_file_systems
from instantstart.services.storage.fsx_params import FsxClaim, FsxFileSystem, FsxListResult
from instantstart.services.storage.inventory import StorageClaim, read_claims
from instantstart.services.storage.s3_claims import active_cluster
from instantstart.store.models import ClusterRow


def _view(fs_id: str, fs: dict[str, Any] | None, created: bool) -> FsxFileSystem:
    lustre = (fs or {}).get("LustreConfiguration") or {}
    return FsxFileSystem(
        file_system_id=fs_id,
        lifecycle=(fs or {}).get("Lifecycle"),
        deployment_type=lustre.get("DeploymentType"),
        storage_type=(fs or {}).get("StorageType"),
        storage_capacity=(fs or {}).get("StorageCapacity"),
        per_unit_storage_throughput=lustre.get("PerUnitStorageThroughput"),
        throughput_capacity=lustre.get("ThroughputCapacity"),
        dns_name=(fs or {}).get("DNSName"),
        mount_name=lustre.get("MountName"),
        subnet_ids=list((fs or {}).get("SubnetIds") or []),
        created_by_instantstart=created,
    )


def read_fsx(app: AppContext, row: ClusterRow) -> list[FsxClaim]:
    """Every FSx claim with its file system, then the cluster's tagged file systems no claim uses (blocking)."""
    ours = created_file_systems(app, row.tag)
    claims: list[StorageClaim] = [c for c in read_claims(app, row) if c.type == "fsx"]
    out: list[FsxClaim] = []
    seen: set[str] = set()
    for c in claims:
        fs_id = c.file_system_id or ""
        fs = fsx_api.describe(app.aws, row.region, fs_id) if fs_id.startswith("fs-") else None
        seen.add(fs_id)
        out.append(FsxClaim(name=c.name, namespace=c.namespace, persistent_volume=c.persistent_volume, phase=c.phase,
                            mounted_by=c.mounted_by, file_system=_view(fs_id, fs, fs_id in ours)))
    for fs in fsx_api.tagged(app.aws, row.region, TAG_CLUSTER, row.tag):
        if fs["FileSystemId"] not in seen:
            out.append(FsxClaim(file_system=_view(fs["FileSystemId"], fs, fs["FileSystemId"] in ours)))
    return out


@operation("fsx_storage_list", method="GET", path="/storage/fsx", example={})
async def fsx_storage_list(ctx: CallContext, req: NoInput) -> FsxListResult:
    """The active cluster's FSx for Lustre volumes: each claim (phase, the pods mounting it) with its file
    system (lifecycle, deployment type, capacity GiB, throughput, DNS and mount name, whether InstantStart
    created it), then file systems tagged for the cluster that no claim uses (e.g. still CREATING)."""
    row = await active_cluster(ctx)
    claims = await blocking(read_fsx, ctx.app, row)
    return FsxListResult(cluster_tag=row.tag, claims=claims, count=len(claims))
