"""Control-plane reactions every cluster has: CRD registration, garbage collection, namespace cleanup.

They run as ObjectStore listeners, so they react the same whether a change came through the API
server or from the simulator writing to the store directly.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from hyperpod_twin.kube.store import NotFoundError, ObjectStore, ResourceType, StoreError, WatchEvent
from hyperpod_twin.kube.types import builtin, core

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


@dataclass
class CrdInfo:
    """What the server needs of a CRD beyond its ResourceType: versions, printer columns, scale paths."""

    name: str
    served_versions: list[str]
    storage_version: str
    categories: list[str] = field(default_factory=list)
    printer_columns: dict[str, list[Obj]] = field(default_factory=dict)
    scale: Obj | None = None
    schemas: dict[str, Obj] = field(default_factory=dict)


def crd_resource_type(crd: Obj) -> tuple[ResourceType, CrdInfo]:
    """The ResourceType (at the storage version) and extra info a CRD declares."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not versions:
        raise ValueError("a CRD must serve at least one version")
    storage = next((v for v in versions if v.get("storage")), versions[0])
    subresources = storage.get("subresources") or {}
    rtype = ResourceType(
        group=spec.get("group", ""),
        version=storage["name"],
        kind=names.get("kind", ""),
        plural=names.get("plural", ""),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        singular=names.get("singular") or names.get("kind", "").lower(),
        short_names=tuple(names.get("shortNames") or ()),
        subresources=tuple(s for s in ("status", "scale") if s in subresources),
        list_kind=names.get("listKind") or names.get("kind", "") + "List",
    )
    info = CrdInfo(
        name=crd["metadata"]["name"],
        served_versions=[v["name"] for v in versions],
        storage_version=storage["name"],
        categories=list(names.get("categories") or ()),
        printer_columns={v["name"]: list(v.get("additionalPrinterColumns") or []) for v in versions},
        scale=subresources.get("scale"),
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in versions},
    )
    return rtype, info


class ControlPlane:
    """The controllers of one cluster's control plane that the API server relies on."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.crds: dict[tuple[str, str], CrdInfo] = {}
        store.add_listener(self._on_event)

    def close(self) -> None:
        """Stop reacting to the store."""
        self.store.remove_listener(self._on_event)

    # -- dispatch ----------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        try:
            if event.rtype.key == CRD_KEY:
                self._on_crd(event)
            if event.type == "DELETED":
                if event.rtype.key == ("", "namespaces"):
                    self.purge_namespace(event.object["metadata"]["name"])
                self.collect_dependents(event.object, event.rtype)
            elif event.type == "ADDED" and event.rtype.key == ("", "namespaces"):
                self._ensure_default_service_account(event.object["metadata"]["name"])
        except Exception:
            # A failing controller must not fail the write that triggered it.
            log.exception("control plane reaction to %s %s failed", event.type, event.rtype.plural)

    # -- CRDs --------------------------------------------------------------------------------
    def _on_crd(self, event: WatchEvent) -> None:
        crd = event.object
        if event.type == "DELETED":
            self._remove_crd(crd)
            return
        try:
            rtype, info = crd_resource_type(crd)
        except (ValueError, KeyError):
            log.warning("ignoring invalid CRD %s", crd.get("metadata", {}).get("name"))
            return
        previous = next((k for k, i in self.crds.items() if i.name == info.name), None)
        if previous is not None and previous != rtype.key:
            self.crds.pop(previous)
        self.crds[rtype.key] = info
        self.store.register(rtype)
        if crd.get("metadata", {}).get("deletionTimestamp"):
            return
        names = dict((crd.get("spec") or {}).get("names") or {})
        names.setdefault("singular", rtype.singular)
        names.setdefault("listKind", rtype.list_kind)
        status = dict(crd.get("status") or {})
        stamp = crd["metadata"].get("creationTimestamp", "")
        wanted = {
            "acceptedNames": names,
            "storedVersions": sorted(set(status.get("storedVersions") or []) | {info.storage_version}),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": stamp},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": stamp},
            ],
        }
        if all(status.get(k) == v for k, v in wanted.items()):
            return
        try:
            self.store.update(
                builtin(*CRD_KEY),
                {"metadata": {"name": crd["metadata"]["name"]}, "status": status | wanted},
                subresource="status",
            )
        except StoreError:
            log.debug("CRD %s changed while being established", crd["metadata"]["name"])

    def _remove_crd(self, crd: Obj) -> None:
        try:
            rtype, _ = crd_resource_type(crd)
        except (ValueError, KeyError):
            return
        current = self.store.types.get(rtype.key)
        if current is None:
            return
        items, _ = self.store.list(current)
        for item in items:
            meta = item["metadata"]
            with contextlib.suppress(NotFoundError):
                self.store.delete(current, meta.get("namespace", ""), meta["name"])
        self.store.unregister(*rtype.key)
        self.crds.pop(rtype.key, None)

    # -- garbage collection ------------------------------------------------------------------
    def dependents(self, owner: Obj, owner_type: ResourceType) -> list[tuple[ResourceType, Obj]]:
        """Objects whose ownerReferences name `owner` (same namespace, or any for a cluster-scoped owner)."""
        uid = owner.get("metadata", {}).get("uid")
        namespace = owner.get("metadata", {}).get("namespace") if owner_type.namespaced else None
        found: list[tuple[ResourceType, Obj]] = []
        for rtype in list(self.store.types.values()):
            if namespace is not None and not rtype.namespaced:
                continue
            items, _ = self.store.list(
                rtype,
                namespace,
                lambda o: any(r.get("uid") == uid for r in o.get("metadata", {}).get("ownerReferences") or []),
            )
            found.extend((rtype, item) for item in items)
        return found

    def collect_dependents(self, owner: Obj, owner_type: ResourceType) -> None:
        """The owner is gone: delete dependents it solely owned, drop its reference from the others."""
        uid = owner.get("metadata", {}).get("uid")
        for rtype, item in self.dependents(owner, owner_type):
            meta = item["metadata"]
            refs = meta.get("ownerReferences") or []
            remaining = [r for r in refs if r.get("uid") != uid]
            try:
                if remaining and any(self._owner_exists(r, meta.get("namespace")) for r in remaining):
                    meta["ownerReferences"] = remaining
                    meta.pop("resourceVersion", None)
                    self.store.update(rtype, item)
                else:
                    self.store.delete(rtype, meta.get("namespace", ""), meta["name"])
            except StoreError:
                log.debug("dependent %s/%s changed during collection", rtype.plural, meta["name"])

    def orphan_dependents(self, owner: Obj, owner_type: ResourceType) -> None:
        """Remove references to `owner` from its dependents (propagationPolicy=Orphan)."""
        uid = owner.get("metadata", {}).get("uid")
        for rtype, item in self.dependents(owner, owner_type):
            meta = item["metadata"]
            meta["ownerReferences"] = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
            if not meta["ownerReferences"]:
                meta.pop("ownerReferences")
            meta.pop("resourceVersion", None)
            try:
                self.store.update(rtype, item)
            except StoreError:
                log.debug("dependent %s/%s vanished while orphaning", rtype.plural, meta["name"])

    def _owner_exists(self, ref: Obj, namespace: str | None) -> bool:
        rtype = self.store.type_for(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rtype is None:
            return False
        try:
            obj = self.store.get(rtype, namespace or "", str(ref.get("name", "")))
        except NotFoundError:
            return False
        return bool(obj["metadata"].get("uid") == ref.get("uid"))

    # -- namespaces --------------------------------------------------------------------------
    def purge_namespace(self, namespace: str) -> None:
        """Delete every object in a namespace (the namespace controller's job after deletion)."""
        for rtype in list(self.store.types.values()):
            if not rtype.namespaced:
                continue
            items, _ = self.store.list(rtype, namespace)
            for item in items:
                with contextlib.suppress(NotFoundError):
                    self.store.delete(rtype, namespace, item["metadata"]["name"])

    def _ensure_default_service_account(self, namespace: str) -> None:
        with contextlib.suppress(StoreError):
            self.store.create(core("serviceaccounts"), {"metadata": {"name": "default", "namespace": namespace}})
