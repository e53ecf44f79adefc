"""Pure builders of the FSx for Lustre CSI static PersistentVolume and its claim, and the Lustre option rules."""

from __future__ import annotations

import ipaddress
from typing import Any

from instantstart.manifests.labels import MANAGED_LABELS
from instantstart.manifests.storage import DEFAULT_NAMESPACE, LABEL_CLAIM, LABEL_CLUSTER, pv_name

FSX_CSI_DRIVER = "fsx.csi.aws.com"
DEFAULT_CLAIM = "fsx-claim"
FSX_MOUNT = "/fsx"  # where workloads (training, Ray, model servers, downloads) see an FSx claim
FSX_VOLUME = "fsx"

# What CreateFileSystem accepts for Lustre (FACTS §8): deployment types, and per deployment type and storage
# type the allowed PerUnitStorageThroughput (MB/s/TiB; None: the type takes none) and the capacity rule.
DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
STORAGE_TYPES = ("SSD", "HDD")
VERSIONS = ("2.10", "2.12", "2.15")
COMPRESSION = ("NONE", "LZ4")
THROUGHPUT: dict[tuple[str, str], tuple[int, ...] | None] = {
    ("SCRATCH_1", "SSD"): None,
    ("SCRATCH_2", "SSD"): None,
    ("PERSISTENT_1", "SSD"): (50, 100, 200),
    ("PERSISTENT_1", "HDD"): (12, 40),
    ("PERSISTENT_2", "SSD"): (125, 250, 500, 1000),
}
# HDD capacity steps by throughput tier (GiB).
HDD_STEP = {12: 6000, 40: 1800}
# Intelligent-Tiering (PERSISTENT_2 only; elastic: no StorageCapacity), per the botocore FSx model: the file system's
# ThroughputCapacity in MBps (multiples of 4000; the model's minimum is 4000, though its text also names 1000 and
# 2000, which the SDK refuses client-side), its SSD read cache (DataReadCacheConfiguration, required) and Metadata
# IOPS (AUTOMATIC metadata mode is SSD only, so USER_PROVISIONED).
INTELLIGENT_TIERING = "INTELLIGENT_TIERING"
IT_THROUGHPUT_STEP, IT_THROUGHPUT_MAX = 4000, 2_000_000
READ_CACHE_MODES = ("NO_CACHE", "USER_PROVISIONED", "PROPORTIONAL_TO_THROUGHPUT_CAPACITY")
READ_CACHE_PER_1000_MBPS = (8, 32768)  # GiB of SSD read cache per 1000 MBps of throughput capacity
METADATA_IOPS_SMALL, METADATA_IOPS_STEP, METADATA_IOPS_MAX = (1500, 3000, 6000, 12000), 12000, 192000


def it_throughput_allowed(value: int) -> bool:
    """Whether `value` MBps is an Intelligent-Tiering ThroughputCapacity: a multiple of 4000 up to 2000000."""
    return 0 < value <= IT_THROUGHPUT_MAX and value % IT_THROUGHPUT_STEP == 0


def metadata_iops_allowed(value: int) -> bool:
    """Whether `value` is a Metadata IOPS setting: 1500, 3000, 6000, 12000, or a multiple of 12000 up to 192000."""
    return value in METADATA_IOPS_SMALL or (0 < value <= METADATA_IOPS_MAX and value % METADATA_IOPS_STEP == 0)


def read_cache_bounds(throughput: int) -> tuple[int, int]:
    """(smallest, largest) SSD read cache in GiB for an Intelligent-Tiering file system of `throughput` MBps."""
    low, high = READ_CACHE_PER_1000_MBPS
    return -(-low * throughput // 1000), high * throughput // 1000


def capacity_rule(deployment: str, storage_type: str, throughput: int | None) -> tuple[tuple[int, ...], int]:
    """(the small sizes allowed, the increment above them) in GiB for a Lustre file system."""
    if storage_type == "HDD":
        step = HDD_STEP.get(throughput or 0, 6000)
        return (), step
    return (1200, 2400), 3600 if deployment == "SCRATCH_1" else 2400


def capacity_allowed(deployment: str, storage_type: str, throughput: int | None, capacity: int) -> bool:
    """Whether `capacity` GiB is a size CreateFileSystem accepts for this combination."""
    small, step = capacity_rule(deployment, storage_type, throughput)
    if capacity in small:
        return True
    floor = 2400 if small else step
    return capacity >= floor and capacity % step == 0


def describe_capacity_rule(deployment: str, storage_type: str, throughput: int | None) -> str:
    """The capacity rule in words, for an error message."""
    small, step = capacity_rule(deployment, storage_type, throughput)
    if small:
        return f"1200, 2400, or a multiple of {step} GiB above 2400"
    return f"a multiple of {step} GiB"


LUSTRE_PORTS = ((988, 988), (1018, 1023))  # TCP: what a Lustre client needs to reach on the file system


def _covers(permission: dict[str, Any], low: int, high: int) -> bool:
    if permission.get("IpProtocol") == "-1":
        return True
    if permission.get("IpProtocol") not in ("tcp", "6"):
        return False
    return int(permission.get("FromPort", -1)) <= low and int(permission.get("ToPort", -1)) >= high


def _from(permission: dict[str, Any], source_group: str, source_cidr: str | None) -> bool:
    if any(pair.get("GroupId") == source_group for pair in permission.get("UserIdGroupPairs") or []):
        return True
    if source_cidr is None:
        return False
    inner = ipaddress.ip_network(source_cidr, strict=False)
    for item in permission.get("IpRanges") or []:
        try:
            if inner.subnet_of(ipaddress.ip_network(str(item.get("CidrIp")), strict=False)):  # type: ignore[arg-type]
                return True
        except (TypeError, ValueError):
            continue
    return False


def lustre_gaps(groups: list[dict[str, Any]], source_group: str, source_cidr: str | None = None) -> list[str]:
    """The Lustre port ranges ("988", "1018-1023") that no inbound rule of the file system's security groups
    (DescribeSecurityGroups items) allows over TCP from `source_group` (the nodes' group) or from a CIDR range
    containing `source_cidr` (the nodes' subnet). Empty when the nodes can mount it."""
    missing = []
    for low, high in LUSTRE_PORTS:
        allowed = any(
            _covers(perm, low, high) and _from(perm, source_group, source_cidr)
            for group in groups
            for perm in group.get("IpPermissions") or []
        )
        if not allowed:
            missing.append(str(low) if low == high else f"{low}-{high}")
    return missing


def claim_volume(claim: str, *, read_only: bool = False) -> dict[str, Any]:
    """The pod volume of an FSx claim (named `fsx`)."""
    source: dict[str, Any] = {"claimName": claim}
    if read_only:
        source["readOnly"] = True
    return {"name": FSX_VOLUME, "persistentVolumeClaim": source}


def claim_mount(*, read_only: bool = False) -> dict[str, Any]:
    """The container's mount of the FSx volume at /fsx."""
    mount: dict[str, Any] = {"name": FSX_VOLUME, "mountPath": FSX_MOUNT}
    if read_only:
        mount["readOnly"] = True
    return mount


def mount_target(dns_name: str, mount_name: str) -> str:
    """What a node mounts: <dnsName>@tcp:/<mountName>."""
    return f"{dns_name}@tcp:/{mount_name}"


def _labels(cluster_tag: str, claim: str) -> dict[str, str]:
    return {**MANAGED_LABELS, LABEL_CLUSTER: cluster_tag, LABEL_CLAIM: claim}


def build_pv(
    *,
    cluster_tag: str,
    claim: str,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    namespace: str = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """The static PV for the FSx for Lustre CSI driver on one file system (Retain: deleting the claim never
    deletes data), reserved for namespace/claim by claimRef."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name(claim), "labels": _labels(cluster_tag, claim)},
        "spec": {
            "capacity": {"storage": f"{capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "mountOptions": ["flock"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": file_system_id,
                "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
            },
        },
    }


def build_pvc(*, cluster_tag: str, claim: str, capacity_gib: int, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """The claim bound to its FSx PV by volumeName, empty storage class (static volume)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace, "labels": _labels(cluster_tag, claim)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name(claim),
            "resources": {"requests": {"storage": f"{capacity_gib}Gi"}},
        },
    }


def pv_source(pv: dict[str, Any]) -> dict[str, Any]:
    """What an FSx PV mounts: {driver, fileSystemId, dnsName, mountName, claim}."""
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    attrs = csi.get("volumeAttributes") or {}
    ref = spec.get("claimRef") or {}
    return {
        "driver": csi.get("driver"),
        "fileSystemId": csi.get("volumeHandle"),
        "dnsName": attrs.get("dnsname"),
        "mountName": attrs.get("mountname"),
        "claim": f"{ref.get('namespace', DEFAULT_NAMESPACE)}/{ref['name']}" if ref.get("name") else None,
    }


def pv_differences(existing: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Why an existing PV cannot be adopted as the desired FSx one (empty when it can)."""
    have, want = pv_source(existing), pv_source(desired)
    problems = [
        f"{key} is {have[key]!r}, wanted {want[key]!r}"
        for key in ("driver", "fileSystemId", "dnsName", "mountName")
        if have[key] != want[key]
    ]
    if have["claim"] not in (None, want["claim"]):
        problems.append(f"it is reserved for {have['claim']}, not {want['claim']}")
    return problems
