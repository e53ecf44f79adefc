"""Pure builders of the Mountpoint for S3 CSI PersistentVolume and its claim, with the name rules they need."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from instantstart.errors import InvalidInput
from instantstart.manifests.labels import MANAGED_LABELS
from instantstart.validation import DNS1123_LABEL_RE

S3_CSI_DRIVER = "s3.csi.aws.com"
DEFAULT_CLAIM = "s3-claim"
DEFAULT_NAMESPACE = "default"
# Mountpoint ignores the size, but Kubernetes requires one on both objects; the claim asks for no more
# than the volume offers so the binder accepts the pair.
CAPACITY = "1200Gi"
LABEL_CLUSTER = "instantstart.io/cluster-tag"
LABEL_CLAIM = "instantstart.io/storage"

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_BAD_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_BAD_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9!_.*'()/-]{1,512}$")


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput(
        f"Invalid input: {field}: {message}", details={"fields": [{"field": field, "message": message}]}
    )


def validate_claim_name(name: str, field: str = "name") -> str:
    """A claim name must be a DNS-1123 label (the PV is named after it)."""
    if not DNS1123_LABEL_RE.match(name) or len(name) > 60:
        raise _invalid(field, "must be 1-60 lowercase letters, digits or '-', starting and ending alphanumeric")
    return name


def validate_bucket_name(name: str, field: str = "bucketName") -> str:
    """S3 general-purpose bucket naming rules (3-63 characters, lowercase, no IP form, reserved affixes)."""
    if not _BUCKET_RE.match(name):
        raise _invalid(field, "must be 3-63 lowercase letters, digits, '.' or '-', starting and ending alphanumeric")
    if ".." in name or ".-" in name or "-." in name:
        raise _invalid(field, "must not contain '..', '.-' or '-.'")
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        raise _invalid(field, "must not be formatted as an IP address")
    if name.startswith(_BUCKET_BAD_PREFIXES) or name.endswith(_BUCKET_BAD_SUFFIXES):
        raise _invalid(field, "uses a prefix or suffix that S3 reserves")
    return name


def validate_prefix(prefix: str, field: str = "prefix") -> str:
    """An S3 key prefix as Mountpoint and ListObjectsV2 accept it (safe characters, no leading '/')."""
    if not _PREFIX_RE.match(prefix) or prefix.startswith("/") or "//" in prefix or ".." in prefix.split("/"):
        raise _invalid(field, "must be 1-512 characters of letters, digits and !_.*'()/- without a leading '/'")
    return prefix


def pv_name(claim: str) -> str:
    """The PersistentVolume backing a claim: `<claim>-pv`."""
    return f"{claim}-pv"


def volume_handle(cluster_tag: str, claim: str) -> str:
    """The CSI volume handle: unique per cluster and claim."""
    return f"instantstart-{cluster_tag}-{claim}"


def mount_options(region: str, prefix: str | None = None) -> list[str]:
    """Mountpoint options: deletes allowed, readable by non-root containers, the bucket's Region, a prefix."""
    options = ["allow-delete", "allow-other", f"region {region}"]
    if prefix:
        options.append(f"prefix {prefix.rstrip('/')}/")
    return options


def _labels(cluster_tag: str, claim: str) -> dict[str, str]:
    return {**MANAGED_LABELS, LABEL_CLUSTER: cluster_tag, LABEL_CLAIM: claim}


def build_pv(
    *,
    cluster_tag: str,
    claim: str,
    bucket: str,
    region: str,
    namespace: str = DEFAULT_NAMESPACE,
    prefix: str | None = None,
) -> dict[str, Any]:
    """The static PV for the Mountpoint S3 CSI driver on `bucket`, reserved for `namespace/claim` by claimRef."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name(claim), "labels": _labels(cluster_tag, claim)},
        "spec": {
            "capacity": {"storage": CAPACITY},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "mountOptions": mount_options(region, prefix),
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": {
                "driver": S3_CSI_DRIVER,
                "volumeHandle": volume_handle(cluster_tag, claim),
                "volumeAttributes": {"bucketName": bucket},
            },
        },
    }


def build_pvc(*, cluster_tag: str, claim: str, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """The claim, bound to its PV by volumeName with the empty storage class (no dynamic provisioning)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace, "labels": _labels(cluster_tag, claim)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name(claim),
            "resources": {"requests": {"storage": CAPACITY}},
        },
    }


def pv_source(pv: dict[str, Any]) -> dict[str, Any]:
    """What an existing PV mounts: {driver, bucket, region, prefix, claim} read from its spec."""
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    attrs = csi.get("volumeAttributes") or {}
    options = spec.get("mountOptions") or []
    region = next((o.split(None, 1)[1] for o in options if o.startswith("region ") and " " in o), None)
    prefix = next((o.split(None, 1)[1] for o in options if o.startswith("prefix ") and " " in o), None)
    ref = spec.get("claimRef") or {}
    return {
        "driver": csi.get("driver"),
        "bucket": attrs.get("bucketName"),
        "region": region,
        "prefix": prefix,
        "claim": f"{ref.get('namespace', DEFAULT_NAMESPACE)}/{ref['name']}" if ref.get("name") else None,
    }


def pv_differences(existing: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Why an existing PV cannot be adopted as the desired one (empty when it can)."""
    have, want = pv_source(existing), pv_source(desired)
    problems = []
    for key in ("driver", "bucket", "region", "prefix"):
        if have[key] != want[key]:
            problems.append(f"{key} is {have[key]!r}, wanted {want[key]!r}")
    if have["claim"] not in (None, want["claim"]):
        problems.append(f"it is reserved for {have['claim']}, not {want['claim']}")
    return problems


def pvc_differences(existing: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Why an existing claim cannot be adopted (it must use the desired PV and the empty storage class)."""
    have, want = existing.get("spec") or {}, desired["spec"]
    problems = []
    if have.get("volumeName") not in (None, "", want["volumeName"]):
        problems.append(f"it is bound to volume {have.get('volumeName')!r}, not {want['volumeName']!r}")
    if (have.get("storageClassName") or "") != "":
        problems.append(f"it uses storage class {have.get('storageClassName')!r}; a static volume needs \"\"")
    return problems
