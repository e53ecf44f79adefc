"""FSx claims that workloads may mount at /fsx: only an FSx for Lustre claim InstantStart made for the cluster."""

from __future__ import annotations

from typing import Any

from instantstart.context import AppContext
from instantstart.errors import InvalidInput, NotFound
from instantstart.kube import k8s
from instantstart.kube.apply import read_object
from instantstart.kube.calls import as_dict, kube_api, kube_call
from instantstart.manifests import fsx as fsx_m
from instantstart.manifests import storage as m
from instantstart.store.models import ClusterRow

FSX_MOUNT = fsx_m.FSX_MOUNT


def _ours(obj: dict[str, Any] | None, cluster_tag: str, claim: str) -> bool:
    """Whether a PV or claim carries the labels fsx_storage_create puts on it for this cluster and claim."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    wanted = {**m.MANAGED_BY, m.LABEL_CLUSTER: cluster_tag, m.LABEL_CLAIM: claim}
    return all(labels.get(key) == value for key, value in wanted.items())


def fsx_claims_in(api: k8s.ApiClient, cluster_tag: str, namespace: str) -> list[str]:
    """The FSx claims InstantStart made for the cluster in `namespace` (blocking; one list call)."""
    selector = f"{m.LABEL_CLUSTER}={cluster_tag}"
    pvs = as_dict(api, kube_call("list volumes", k8s.CoreV1Api(api).list_persistent_volume,
                                 label_selector=selector)).get("items") or []
    names = []
    for pv in pvs:
        source = fsx_m.pv_source(pv)
        ns, _, name = str(source["claim"] or "").partition("/")
        if source["driver"] == fsx_m.FSX_CSI_DRIVER and ns == namespace and _ours(pv, cluster_tag, name):
            names.append(name)
    return sorted(names)


def check_fsx_claim(api: k8s.ApiClient, cluster_tag: str, namespace: str, claim: str,
                    field: str = "fsxClaim") -> str:
    """Blocking: `claim` is an FSx for Lustre claim in `namespace` that fsx_storage_create made for the cluster
    (claim and PV labelled by InstantStart, the PV on the FSx CSI driver); returns it. A missing claim is NotFound,
    any other claim (an S3 one, one made by hand) InvalidInput; both name `field` and the FSx claims that exist."""
    existing = fsx_claims_in(api, cluster_tag, namespace)
    listed = ", ".join(existing) or "none"
    hint = (f"FSx claims of cluster {cluster_tag} in namespace {namespace}: {listed}. Name one of them, or create one "
            "with fsx_storage_create (fsx_storage_list shows every namespace).")
    pvc = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": claim, "namespace": namespace}})
    if pvc is None:
        raise NotFound(f"{field}: namespace {namespace} has no claim {claim}.", hint=hint,
                       details={"fields": [{"field": field, "message": "no such claim"}], "fsxClaims": existing})
    volume = (pvc.get("spec") or {}).get("volumeName")
    pv = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume}}) \
        if volume else None
    is_fsx = pv is not None and fsx_m.pv_source(pv)["driver"] == fsx_m.FSX_CSI_DRIVER
    if not is_fsx or not _ours(pv, cluster_tag, claim) or not _ours(pvc, cluster_tag, claim):
        what = "an FSx for Lustre claim InstantStart created" if is_fsx else "an FSx for Lustre claim"
        raise InvalidInput(f"Invalid input: {field}: claim {namespace}/{claim} is not {what} for cluster "
                           f"{cluster_tag}", hint=hint,
                           details={"fields": [{"field": field, "message": f"not {what}"}], "fsxClaims": existing})
    return claim


def mountable_fsx(app: AppContext, row: ClusterRow, namespace: str, claim: str | None, words: list[str],
                  field: str = "command") -> str | None:
    """Blocking: the FSx claim a workload mounts at /fsx (None when none is asked and `words` do not use /fsx);
    refused as check_fsx_claim and require_fsx_claim say."""
    require_fsx_claim(words, claim, field)
    if claim is None:
        return None
    return check_fsx_claim(kube_api(app.kube, row.eks_cluster_name, row.region), row.tag, namespace, claim)


def uses_fsx(words: list[str]) -> bool:
    """Whether a command line names a path under /fsx (it needs an FSx claim mounted)."""
    return any(w == FSX_MOUNT or w.startswith(FSX_MOUNT + "/") or f"={FSX_MOUNT}/" in w for w in words)


def require_fsx_claim(words: list[str], claim: str | None, field: str = "command") -> None:
    """A command that reads or writes under /fsx needs fsxClaim; refused naming both fields otherwise."""
    if claim is None and uses_fsx(words):
        raise InvalidInput(f"Invalid input: {field}: uses {FSX_MOUNT}, but fsxClaim is not set",
                           hint="Name the FSx claim to mount at /fsx in fsxClaim (fsx_storage_list shows them).",
                           details={"fields": [{"field": "fsxClaim", "message": f"required when {field} uses "
                                                f"{FSX_MOUNT}"}]})
