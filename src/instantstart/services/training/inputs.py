"""Files a job reads from its S3 claim (a recipe's configFile): found in the claim's bucket before it is submitted."""

from __future__ import annotations

import re

from instantstart.aws import identity, s3
from instantstart.context import AppContext
from instantstart.errors import PreconditionFailed
from instantstart.kube.apply import read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import storage as storage_m
from instantstart.manifests import training as training_manifests
from instantstart.services.training.checks import field_error
from instantstart.store.models import ClusterRow


def claim_bucket(app: AppContext, row: ClusterRow, namespace: str, claim: str) -> tuple[str, str, str]:
    """Blocking: (bucket, Region, key prefix) the claim mounts, read from its bound PersistentVolume (what the
    pods' Mountpoint reads); PreconditionFailed when the claim is not a bound S3 CSI volume."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pvc = kube_call(f"read claim {namespace}/{claim}", read_object, api,
                    {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": claim, "namespace": namespace}})
    volume = ((pvc or {}).get("spec") or {}).get("volumeName")
    pv = kube_call(f"read volume {volume}", read_object, api,
                   {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume}}) if volume else None
    source = storage_m.pv_source(pv) if pv is not None else {}
    if source.get("driver") != storage_m.S3_CSI_DRIVER or not source.get("bucket"):
        raise PreconditionFailed(
            f"Claim {namespace}/{claim} is not bound to an S3 volume, so files under "
            f"{training_manifests.S3_MOUNT} cannot be found.",
            hint="Create the claim with s3_storage_create (or name an S3 claim in s3Claim) and wait until it is bound.",
        )
    return str(source["bucket"]), str(source.get("region") or row.region), str(source.get("prefix") or "")


def object_key(prefix: str, path: str) -> str:
    """The S3 key a path under the S3 mount maps to through the claim's prefix (as Mountpoint maps it)."""
    inside = re.sub(r"/+", "/", path)[len(training_manifests.S3_MOUNT) + 1:]
    return "/".join(part for part in (prefix.rstrip("/"), inside) if part)


def check_files(app: AppContext, row: ClusterRow, namespace: str, claim: str | None, files: dict[str, str]) -> None:
    """Blocking: every file (field → path under /s3) exists in the claim's bucket; else InvalidInput naming the
    field, the object it was looked for and how to put it there."""
    if not files:
        return
    if not claim:
        field = next(iter(files))
        raise field_error(field, f"{files[field]} is under {training_manifests.S3_MOUNT} but s3Claim is empty",
                          "Name the S3 claim the file is in (s3Claim, default s3-claim).")
    bucket, region, prefix = claim_bucket(app, row, namespace, claim)
    owner = identity.account_id(app.aws, region)
    for field, path in files.items():
        key = object_key(prefix, path)
        if not s3.object_exists(app.aws, region, bucket, key, owner):
            raise field_error(
                field, f"{path} does not exist: no object s3://{bucket}/{key} (claim {namespace}/{claim})",
                f"Upload the file there (e.g. `aws s3 cp <file> s3://{bucket}/{key}`) or fix the path; "
                f"s3_storage_list_contents lists what the claim holds.")
