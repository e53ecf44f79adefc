"""Typed params and wire models of the FSx for Lustre tools, and the Lustre option validation (FACTS §8)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.errors import InvalidInput
from instantstart.manifests import fsx as fsx_manifests
from instantstart.operations.params import ParamsModel
from instantstart.validation import KubeName

FILE_SYSTEM_ID = r"^fs-[0-9a-f]{8,21}$"
SUBNET_ID = r"^subnet-[0-9a-f]{8,17}$"


class FsxCreateRequest(WireModel):
    """A claim on an FSx for Lustre file system: a new one in the cluster's compute subnet, or an existing one."""

    name: KubeName = Field(
        default=fsx_manifests.DEFAULT_CLAIM, description="Claim name (namespace default); the PV is <name>-pv."
    )
    file_system_id: str | None = Field(
        default=None, pattern=FILE_SYSTEM_ID,
        description="Adopt this existing Lustre file system instead of creating one (it is never deleted by us).",
    )
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = Field(
        default="PERSISTENT_2", description="SCRATCH_1|SCRATCH_2|PERSISTENT_1|PERSISTENT_2."
    )
    storage_type: Literal["SSD", "HDD", "INTELLIGENT_TIERING"] = Field(
        default="SSD",
        description="SSD; HDD (PERSISTENT_1 only); INTELLIGENT_TIERING (PERSISTENT_2 only: elastic, no "
        "storageCapacity; give throughputCapacity).",
    )
    storage_capacity: int = Field(
        default=1200, ge=1200, le=2_000_000,
        description="GiB: SSD 1200, 2400, then +2400 (SCRATCH_1: +3600); HDD per throughput tier "
        "(12: multiples of 6000, 40: multiples of 1800).",
    )
    per_unit_storage_throughput: int | None = Field(
        default=None,
        description="MB/s per TiB, PERSISTENT only: PERSISTENT_2 SSD 125/250/500/1000 (default 250), "
        "PERSISTENT_1 SSD 50/100/200, PERSISTENT_1 HDD 12/40.",
    )
    throughput_capacity: int | None = Field(
        default=None,
        description="INTELLIGENT_TIERING only (required there): the file system's throughput in MBps: a multiple of "
        "4000 up to 2000000.",
    )
    read_cache_sizing_mode: Literal["NO_CACHE", "USER_PROVISIONED", "PROPORTIONAL_TO_THROUGHPUT_CAPACITY"] | None = (
        Field(
            default=None,
            description="INTELLIGENT_TIERING only: the SSD read cache, NO_CACHE|USER_PROVISIONED|"
            "PROPORTIONAL_TO_THROUGHPUT_CAPACITY (default).",
        )
    )
    read_cache_size_gib: int | None = Field(
        default=None,
        description="INTELLIGENT_TIERING with readCacheSizingMode USER_PROVISIONED: GiB, 8 to 32768 per 1000 MBps "
        "of throughputCapacity.",
    )
    metadata_iops: int | None = Field(
        default=None,
        description="INTELLIGENT_TIERING only: Metadata IOPS (USER_PROVISIONED mode): 1500, 3000, 6000 (default), "
        "12000, or a multiple of 12000 up to 192000.",
    )
    data_compression_type: Literal["NONE", "LZ4"] = Field(default="LZ4", description="NONE or LZ4.")
    file_system_type_version: Literal["2.10", "2.12", "2.15"] = Field(default="2.15", description="Lustre version.")
    subnet_id: str | None = Field(
        default=None, pattern=SUBNET_ID, description="Default: the cluster's HyperPod compute subnet."
    )
    enable_csi_driver: bool = Field(
        default=False, description="Enable the fsxCsiDriver feature first when the cluster does not have it yet."
    )
    allow_lustre_from_nodes: bool = Field(
        default=False,
        description="With fileSystemId: when the file system's security group does not let the cluster's nodes in "
        "over Lustre (TCP 988, 1018-1023), add those inbound rules from the node security group, only into a group "
        "tagged instantstart:cluster-tag (an untagged group is the operator's: refused, naming the commands to run; "
        "default: refuse, naming the missing rules).",
    )


class FsxParams(ParamsModel):
    """Stored params of fsx_storage_create (validated, defaults filled in)."""

    cluster_tag: str
    region: str
    name: str
    namespace: str
    file_system_id: str | None = None
    deployment_type: str
    storage_type: str
    storage_capacity: int  # INTELLIGENT_TIERING: not sent (elastic); the PV's nominal capacity
    per_unit_storage_throughput: int | None = None
    throughput_capacity: int | None = None
    read_cache: dict[str, Any] | None = None  # DataReadCacheConfiguration
    metadata_iops: int | None = None
    data_compression_type: str
    file_system_type_version: str
    subnet_id: str | None = None
    vpc_id: str | None = None
    node_security_group_id: str | None = None
    enable_csi_driver: bool = False
    rules_group_id: str | None = None  # adopted file system: its group to add the Lustre rules to (asked for)


class FsxFileSystem(WireModel):
    """One FSx for Lustre file system behind a claim (or of the cluster)."""

    file_system_id: str
    lifecycle: str | None = Field(default=None, description="AVAILABLE, CREATING, … or None when it is gone.")
    deployment_type: str | None = None
    storage_type: str | None = None
    storage_capacity: int | None = None
    per_unit_storage_throughput: int | None = None
    throughput_capacity: int | None = Field(default=None, description="INTELLIGENT_TIERING: MBps.")
    dns_name: str | None = None
    mount_name: str | None = None
    subnet_ids: list[str] = []
    created_by_instantstart: bool = Field(description="True when fsx_storage_create made it (deleted with its claim).")


class FsxClaim(WireModel):
    """A claim on an FSx for Lustre volume and its file system."""

    name: str | None = Field(default=None, description="The claim; None for a cluster file system with no claim.")
    namespace: str | None = None
    persistent_volume: str | None = None
    phase: str | None = None
    mounted_by: list[str] = []
    file_system: FsxFileSystem


class FsxListResult(WireModel):
    """The active cluster's FSx for Lustre claims and file systems."""

    cluster_tag: str
    claims: list[FsxClaim]
    count: int


def _refuse(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(
        f"Invalid input: {field}: {message}", hint=hint, details={"fields": [{"field": field, "message": message}]}
    )


def lustre_options(req: FsxCreateRequest) -> tuple[int | None, int]:
    """Check deployment type, storage type, throughput and capacity together; (throughput, capacity) to use.
    Every refusal names the field and the values allowed for the combination."""
    if req.storage_type == fsx_manifests.INTELLIGENT_TIERING:
        return intelligent_tiering_options(req)
    for name in ("throughput_capacity", "read_cache_sizing_mode", "read_cache_size_gib", "metadata_iops"):
        if getattr(req, name) is not None:
            field = _camel(name)
            raise _refuse(field, f"only used with storageType INTELLIGENT_TIERING, not {req.storage_type}",
                          f"Omit {field}, or use storageType INTELLIGENT_TIERING with deploymentType PERSISTENT_2.")
    key = (req.deployment_type, req.storage_type)
    if key not in fsx_manifests.THROUGHPUT:
        allowed = sorted({d for d, s in fsx_manifests.THROUGHPUT if s == req.storage_type})
        raise _refuse("storageType", f"{req.storage_type} is not available with {req.deployment_type}",
                      f"storageType {req.storage_type} needs deploymentType in {allowed}; or use storageType SSD.")
    tiers = fsx_manifests.THROUGHPUT[key]
    throughput = req.per_unit_storage_throughput
    if tiers is None and throughput is not None:
        raise _refuse("perUnitStorageThroughput", f"{req.deployment_type} takes no throughput setting",
                      "Omit perUnitStorageThroughput, or choose a PERSISTENT_1/PERSISTENT_2 deployment type.")
    if tiers is not None:
        if throughput is None:
            throughput = 250 if 250 in tiers else tiers[0]
        if throughput not in tiers:
            raise _refuse(
                "perUnitStorageThroughput",
                f"{throughput} MB/s/TiB is not allowed for {req.deployment_type} {req.storage_type}; "
                f"allowed: {', '.join(str(t) for t in tiers)}",
                f"Use one of {', '.join(str(t) for t in tiers)}.",
            )
    if not fsx_manifests.capacity_allowed(req.deployment_type, req.storage_type, throughput, req.storage_capacity):
        rule = fsx_manifests.describe_capacity_rule(req.deployment_type, req.storage_type, throughput)
        raise _refuse("storageCapacity", f"{req.storage_capacity} GiB is not allowed for {req.deployment_type} "
                      f"{req.storage_type}; allowed: {rule}", f"Use {rule}.")
    return throughput, req.storage_capacity


def _camel(name: str) -> str:
    return str(FsxCreateRequest.model_fields[name].alias or name)


def intelligent_tiering_options(req: FsxCreateRequest) -> tuple[int | None, int]:
    """INTELLIGENT_TIERING: PERSISTENT_2 only, no storageCapacity or perUnitStorageThroughput, throughputCapacity
    required (1000, 2000, multiples of 4000), read cache and Metadata IOPS within their ranges. Returns
    (None, the PV's nominal capacity)."""
    if req.deployment_type != "PERSISTENT_2":
        raise _refuse("storageType", f"INTELLIGENT_TIERING is not available with {req.deployment_type}",
                      "storageType INTELLIGENT_TIERING needs deploymentType PERSISTENT_2; or use storageType SSD.")
    if "storage_capacity" in req.model_fields_set:
        raise _refuse("storageCapacity", "not used with INTELLIGENT_TIERING (its storage is elastic)",
                      "Omit storageCapacity; size the file system with throughputCapacity.")
    if req.per_unit_storage_throughput is not None:
        raise _refuse("perUnitStorageThroughput", "not used with INTELLIGENT_TIERING",
                      "Give throughputCapacity (MBps for the whole file system) instead.")
    allowed = "a multiple of 4000 up to 2000000 MBps"
    if req.throughput_capacity is None or not fsx_manifests.it_throughput_allowed(req.throughput_capacity):
        given = "missing" if req.throughput_capacity is None else f"{req.throughput_capacity} MBps is not allowed"
        raise _refuse("throughputCapacity", f"{given} for INTELLIGENT_TIERING; allowed: {allowed}",
                      f"Give throughputCapacity: {allowed} (e.g. 4000).")
    mode = req.read_cache_sizing_mode or "PROPORTIONAL_TO_THROUGHPUT_CAPACITY"
    low, high = fsx_manifests.read_cache_bounds(req.throughput_capacity)
    if mode == "USER_PROVISIONED":
        size = req.read_cache_size_gib
        if size is None or not low <= size <= high:
            raise _refuse("readCacheSizeGib", f"{size} is not allowed with USER_PROVISIONED at "
                          f"{req.throughput_capacity} MBps; allowed: {low} to {high} GiB",
                          f"Give readCacheSizeGib between {low} and {high}, or another readCacheSizingMode.")
    elif req.read_cache_size_gib is not None:
        raise _refuse("readCacheSizeGib", f"only used with readCacheSizingMode USER_PROVISIONED, not {mode}",
                      "Omit readCacheSizeGib, or set readCacheSizingMode USER_PROVISIONED.")
    iops = req.metadata_iops
    if iops is not None and not fsx_manifests.metadata_iops_allowed(iops):
        raise _refuse("metadataIops", f"{iops} is not allowed; allowed: 1500, 3000, 6000, 12000, or a multiple of "
                      "12000 up to 192000", "Use 6000 (the default) or 12000.")
    return None, req.storage_capacity


def read_cache(req: FsxCreateRequest) -> dict[str, Any] | None:
    """The DataReadCacheConfiguration of a validated INTELLIGENT_TIERING request (None for other types)."""
    if req.storage_type != fsx_manifests.INTELLIGENT_TIERING:
        return None
    mode = req.read_cache_sizing_mode or "PROPORTIONAL_TO_THROUGHPUT_CAPACITY"
    return {"SizingMode": mode, **({"SizeGiB": req.read_cache_size_gib} if mode == "USER_PROVISIONED" else {})}
