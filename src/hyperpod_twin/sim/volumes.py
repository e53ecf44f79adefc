"""PersistentVolume binding: claims bind to matching static PVs (S3/FSx CSI too) or get a provisioned one."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import PVCS, PVS, STORAGECLASSES
from hyperpod_twin.sim.kobj import Obj

ALL = "all"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
# Drivers that only serve pre-created (static) volumes: a claim on them never gets a provisioned PV.
STATIC_ONLY = ("s3.csi.aws.com", "kubernetes.io/no-provisioner")


def _class_of_claim(pvc: Obj, classes: list[Obj]) -> str:
    """The claim's storage class: explicit (even ""), else the default class, else ""."""
    spec = pvc.get("spec", {})
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        return str(spec["storageClassName"])
    for sc in classes:
        if kobj.annotation(sc, DEFAULT_CLASS) == "true":
            return str(sc["metadata"]["name"])
    return ""


def _fits(pv: Obj, pvc: Obj, storage_class: str) -> bool:
    pv_spec, pvc_spec = pv.get("spec", {}), pvc.get("spec", {})
    if (pv_spec.get("storageClassName") or "") != storage_class:
        return False
    if not set(pvc_spec.get("accessModes") or []) <= set(pv_spec.get("accessModes") or []):
        return False
    if pvc_spec.get("volumeMode", "Filesystem") != pv_spec.get("volumeMode", "Filesystem"):
        return False
    wanted = kobj.quantity(((pvc_spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
    have = kobj.quantity((pv_spec.get("capacity") or {}).get("storage", 0))
    if have < wanted:
        return False
    return kobj.match_labels(pvc_spec["selector"], pv["metadata"].get("labels")) if pvc_spec.get("selector") else True


class VolumeBinder(Controller):
    """The PV controller: binds each Pending claim to the smallest fitting Available PV (a PV's
    claimRef or the claim's volumeName pre-binds), provisions a PV for classes whose provisioner is
    dynamic, and marks PVs Released when their claim goes (Retain) or deletes them (Delete)."""

    watches = (PVCS, PVS, STORAGECLASSES)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        return [ALL]

    def resync_keys(self) -> Iterable[Hashable]:
        return [ALL]

    def reconcile(self, key: Hashable) -> None:
        classes = self.sim.list(STORAGECLASSES)
        pvs = self.sim.list(PVS)
        claims = self.sim.list(PVCS)
        claim_uids = {c["metadata"]["uid"] for c in claims}
        for old in pvs:
            self._release(old, claim_uids)
        pvs = self.sim.list(PVS)
        for pvc in claims:
            if pvc.get("status", {}).get("phase") == "Bound" or pvc["metadata"].get("deletionTimestamp"):
                continue
            storage_class = _class_of_claim(pvc, classes)
            chosen = self._match(pvc, pvs, storage_class) or self._provision(pvc, storage_class, classes)
            if chosen is None:
                self._pending(pvc, storage_class)
                continue
            self._bind(chosen, pvc)
            pvs = self.sim.list(PVS)

    def _match(self, pvc: Obj, pvs: list[Obj], storage_class: str) -> Obj | None:
        ns, name, uid = pvc["metadata"]["namespace"], pvc["metadata"]["name"], pvc["metadata"]["uid"]
        wanted_volume = pvc.get("spec", {}).get("volumeName")
        candidates = []
        for pv in pvs:
            phase = pv.get("status", {}).get("phase", "Available")
            ref = pv.get("spec", {}).get("claimRef") or {}
            if wanted_volume and pv["metadata"]["name"] != wanted_volume:
                continue
            if ref:
                if ref.get("name") != name or ref.get("namespace", "default") != ns or ref.get("uid", uid) != uid:
                    continue
            elif phase != "Available":
                continue
            if wanted_volume or ref or _fits(pv, pvc, storage_class):
                candidates.append(pv)
        candidates.sort(key=lambda pv: kobj.quantity((pv["spec"].get("capacity") or {}).get("storage", 0)))
        return candidates[0] if candidates else None

    def _provision(self, pvc: Obj, storage_class: str, classes: list[Obj]) -> Obj | None:
        sc = next((c for c in classes if c["metadata"]["name"] == storage_class), None)
        if sc is None or sc.get("provisioner", "") in STATIC_ONLY or not storage_class:
            return None
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and not self._consumed(pvc):
            return None
        spec = pvc.get("spec", {})
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        name = f"pvc-{pvc['metadata']['uid']}"
        return self.sim.create(
            PVS,
            {
                "metadata": {
                    "name": name,
                    "annotations": {"pv.kubernetes.io/provisioned-by": sc.get("provisioner", "")},
                },
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                    "storageClassName": storage_class,
                    "volumeMode": spec.get("volumeMode", "Filesystem"),
                    "csi": {"driver": sc.get("provisioner", ""), "volumeHandle": f"vol-{pvc['metadata']['uid'][:17]}"},
                },
                "status": {"phase": "Available"},
            },
        )

    def _consumed(self, pvc: Obj) -> bool:
        from hyperpod_twin.sim.kinds import PODS

        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        for pod in self.sim.list(PODS, ns):
            for volume in pod.get("spec", {}).get("volumes") or []:
                if (volume.get("persistentVolumeClaim") or {}).get("claimName") == name:
                    return True
        return False

    def _bind(self, pv: Obj, pvc: Obj) -> None:
        md = pvc["metadata"]
        pv["spec"]["claimRef"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "name": md["name"],
            "namespace": md["namespace"],
            "uid": md["uid"],
            "resourceVersion": md.get("resourceVersion", ""),
        }
        pv.setdefault("status", {})["phase"] = "Bound"
        self.sim.save(PVS, pv)
        pvc["spec"]["volumeName"] = pv["metadata"]["name"]
        pvc.setdefault("metadata", {}).setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
        pvc["status"] = {
            "phase": "Bound",
            "accessModes": pv["spec"].get("accessModes") or [],
            "capacity": dict(pv["spec"].get("capacity") or {}),
        }
        self.sim.save(PVCS, pvc)

    def _pending(self, pvc: Obj, storage_class: str) -> None:
        if pvc.get("status", {}).get("phase") != "Pending":
            self.sim.patch_status(PVCS, pvc, {"phase": "Pending"})
            reason = "no persistent volumes available for this claim and no storage class is set"
            if storage_class:
                reason = f'storageclass.storage.k8s.io "{storage_class}" has no matching volume'
            self.sim.event(pvc, "FailedBinding", reason, "Warning", source="persistentvolume-controller")

    def _release(self, pv: Obj, claim_uids: set[str]) -> None:
        ref = pv.get("spec", {}).get("claimRef") or {}
        if not ref.get("uid") or ref["uid"] in claim_uids or pv.get("status", {}).get("phase") != "Bound":
            return
        if pv["spec"].get("persistentVolumeReclaimPolicy", "Retain") == "Delete":
            self.sim.delete(PVS, "", pv["metadata"]["name"])
            return
        self.sim.patch_status(PVS, pv, {"phase": "Released"})
