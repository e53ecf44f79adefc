"""FSx claims that workloads may mount at /fsx: only an FSx for Lustre claim InstantStart made for the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from instantstart.context import AppContext
from instantstart.errors import InvalidInput, NotFound
from instantstart.kube.apply import read_object
from instantstart.kube.calls import kube_api
from instantstart.kube.gateway import Api
from instantstart.manifests import fsx as fsx_m
from instantstart.manifests import storage as storage_manifests
from instantstart.services.base.facts import facts_of
from instantstart.store.models import ClusterRow

FSX_MOUNT = fsx_m.FSX_MOUNT


def recorded_fsx_claims(row: ClusterRow, namespace: str) -> dict[str, dict[str, Any]]:
    """The FSx claims fsx_storage_create recorded for the cluster in `namespace` (name → its record: PV, file
    system id, DNS and mount name); storage_delete removes a claim's record."""
    storage = facts_of(row).storage
    return {
        name: dict(rec)
        for name, rec in storage.items()
        if isinstance(rec, dict)
        and rec.get("type") == "fsx"
        and rec.get("namespace", storage_manifests.DEFAULT_NAMESPACE) == namespace
    }


def _matches(pvc: dict[str, Any], pv: dict[str, Any] | None, rec: dict[str, Any]) -> bool:
    """The live claim is bound to the recorded PV, which is on the FSx CSI driver and mounts the recorded file
    system (a claim or PV replaced by hand since fsx_storage_create no longer matches)."""
    if pv is None or (pvc.get("spec") or {}).get("volumeName") != rec.get("persistentVolume"):
        return False
    source = fsx_m.pv_source(pv)
    wanted = {"driver": fsx_m.FSX_CSI_DRIVER, "fileSystemId": rec.get("fileSystemId"), "dnsName": rec.get("dnsName"),
              "mountName": rec.get("mountName")}
    return all(source[key] == value for key, value in wanted.items())


def check_fsx_claim(api: Api, row: ClusterRow, namespace: str, claim: str, field: str = "fsxClaim") -> str:
    """Blocking: `claim` is an FSx for Lustre claim in `namespace` that fsx_storage_create made for the cluster
    (recorded in InstantStart's state, still bound to the recorded PV on the FSx CSI driver and file system);
    returns it. A missing claim is NotFound, any other claim (an S3 one, one made by hand or changed since)
    InvalidInput; both name `field` and the FSx claims that exist."""
    recorded = recorded_fsx_claims(row, namespace)
    listed = ", ".join(sorted(recorded)) or "none"
    hint = (f"FSx claims of cluster {row.tag} in namespace {namespace}: {listed}. Name one of them, or create one "
            "with fsx_storage_create (fsx_storage_list shows every namespace).")
    details: dict[str, Any] = {"fsxClaims": sorted(recorded)}
    pvc = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": claim, "namespace": namespace}})
    if pvc is None:
        raise NotFound(f"{field}: namespace {namespace} has no claim {claim}.", hint=hint,
                       details={"fields": [{"field": field, "message": "no such claim"}], **details})
    volume = (pvc.get("spec") or {}).get("volumeName")
    pv = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume}}) \
        if volume else None
    rec = recorded.get(claim)
    if rec is None or not _matches(pvc, pv, rec):
        is_fsx = pv is not None and fsx_m.pv_source(pv)["driver"] == fsx_m.FSX_CSI_DRIVER
        what = "an FSx for Lustre claim InstantStart created" if is_fsx else "an FSx for Lustre claim"
        raise InvalidInput(f"Invalid input: {field}: claim {namespace}/{claim} is not {what} for cluster {row.tag}",
                           hint=hint, details={"fields": [{"field": field, "message": f"not {what}"}], **details})
    return claim


def mountable_fsx(app: AppContext, row: ClusterRow, namespace: str, claim: str | None, words: Sequence[object],
                  field: str = "command") -> str | None:
    """Blocking: the FSx claim a workload mounts at /fsx (None when none is asked and `words` do not use /fsx);
    refused as check_fsx_claim and require_fsx_claim say."""
    require_fsx_claim(words, claim, field)
    if claim is None:
        return None
    return check_fsx_claim(kube_api(app.kube, row.eks_cluster_name, row.region), row, namespace, claim)


def uses_fsx(words: Sequence[object]) -> bool:
    """Whether a command line (or env values) names a path under /fsx (it needs an FSx claim mounted). Only plain
    strings are read: an env entry that is a secretKeyRef names no path."""
    return any(isinstance(w, str) and (w == FSX_MOUNT or w.startswith(FSX_MOUNT + "/") or f"={FSX_MOUNT}/" in w)
               for w in words)


def require_fsx_claim(words: Sequence[object], claim: str | None, field: str = "command") -> None:
    """A command that reads or writes under /fsx needs fsxClaim; refused naming both fields otherwise."""
    if claim is None and uses_fsx(words):
        raise InvalidInput(f"Invalid input: {field}: uses {FSX_MOUNT}, but fsxClaim is not set",
                           hint="Name the FSx claim to mount at /fsx in fsxClaim (fsx_storage_list shows them).",
                           details={"fields": [{"field": "fsxClaim", "message": f"required when {field} uses "
                                                f"{FSX_MOUNT}"}]})
