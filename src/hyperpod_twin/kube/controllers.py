"""Control-plane reactions every cluster has: CRD registration, garbage collection, namespace cleanup.

They run as ObjectStore listeners, so they react the same whether a change came through the API
server or from the simulator writing to the store directly.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from hyperpod_twin.kube import graceful
from hyperpod_twin.kube.store import ObjectStore, ResourceType, WatchEvent, now_rfc3339
from hyperpod_twin.kube.store_errors import NotFoundError, StoreError
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


def namespace_conditions(counts: dict[str, int], finalizers: dict[str, int]) -> list[Obj]:
    """The namespace controller's conditions while content remains (kube's wording)."""
    stamp = now_rfc3339()

    def cond(kind: str, status: str, reason: str, message: str) -> Obj:
        return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": stamp}

    remaining = ", ".join(f"{k} has {n} resource instances" for k, n in sorted(counts.items()))
    held = ", ".join(f"{k} in {n} resource instances" for k, n in sorted(finalizers.items()))
    return [
        cond("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
             "All resources successfully discovered"),
        cond("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
             "All legacy kube types successfully parsed"),
        cond("NamespaceDeletionContentFailure", "False", "ContentDeleted",
             "All content successfully deleted, may be waiting on finalization"),
        cond("NamespaceContentRemaining", "True", "SomeResourcesRemain", f"Some resources are remaining: {remaining}"),
        cond("NamespaceFinalizersRemaining", "True" if finalizers else "False",
             "SomeFinalizersRemain" if finalizers else "ContentHasNoFinalizers",
             f"Some content in the namespace has finalizers remaining: {held}" if finalizers
             else "All content-preserving finalizers finished"),
    ]


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


# A dependent in the garbage collector's graph: ((group, plural), namespace, name).
DependentKey = tuple[tuple[str, str], str, str]


class ControlPlane:
    """The controllers of one cluster's control plane that the API server relies on."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.crds: dict[tuple[str, str], CrdInfo] = {}
        self.terminating: set[str] = set()
        self.draining_kinds: set[tuple[str, str]] = set()  # CRDs deleted while instances were held
        # The garbage collector's graph: owner uid → its dependents (type, namespace, name), and back; kept from
        # the watch events, so a deletion finds its dependents without a pass over every object of every type.
        self._dependents: dict[str, set[DependentKey]] = {}
        self._owners: dict[DependentKey, set[str]] = {}
        store.add_listener(self._on_event)
        for rtype in list(store.types.values()):
            for obj in store.view(rtype):
                self._index_owners(rtype, obj, deleted=False)

    def close(self) -> None:
        """Stop reacting to the store."""
        self.store.remove_listener(self._on_event)

    # -- dispatch ----------------------------------------------------------------------------
    def _index_owners(self, rtype: ResourceType, obj: Obj, *, deleted: bool) -> None:
        md = obj.get("metadata", {})
        key = (rtype.key, md.get("namespace", "") if rtype.namespaced else "", md.get("name", ""))
        uids = set() if deleted else {str(r["uid"]) for r in md.get("ownerReferences") or [] if r.get("uid")}
        previous = self._owners.get(key, set())
        if uids == previous:
            return
        for uid in previous - uids:
            held = self._dependents.get(uid)
            if held is not None:
                held.discard(key)
                if not held:
                    del self._dependents[uid]
        for uid in uids - previous:
            self._dependents.setdefault(uid, set()).add(key)
        if uids:
            self._owners[key] = uids
        else:
            self._owners.pop(key, None)

    def _on_event(self, event: WatchEvent) -> None:
        self._index_owners(event.rtype, event.object, deleted=event.type == "DELETED")
        try:
            if event.rtype.key == CRD_KEY:
                self._on_crd(event)
            if event.type == "DELETED":
                if event.rtype.key == ("", "namespaces"):
                    self.purge_namespace(event.object["metadata"]["name"])
                self.collect_dependents(event.object, event.rtype)
                namespace = event.object.get("metadata", {}).get("namespace")
                if event.rtype.namespaced and namespace and namespace in self.terminating:
                    self.finish_namespace(namespace)
                if event.rtype.key in self.draining_kinds and not self.store.list(event.rtype)[0]:
                    self.draining_kinds.discard(event.rtype.key)
                    self.store.unregister(*event.rtype.key)
                    self.crds.pop(event.rtype.key, None)
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
            # The CRD's cleanup deletes each instance through the API: finalizers hold them (the
            # real CRD then waits in Terminating; the twin drops the kind once they are gone).
            self.delete_object(current, item)
        if self.store.list(current)[0]:
            # Served until the last finalizer goes, as the real CRD's cleanup finalizer keeps it.
            self.draining_kinds.add(rtype.key)
            return
        self.store.unregister(*rtype.key)
        self.crds.pop(rtype.key, None)

    # -- garbage collection ------------------------------------------------------------------
    def dependents(self, owner: Obj, owner_type: ResourceType) -> list[tuple[ResourceType, Obj]]:
        """Objects whose ownerReferences name `owner` (same namespace, or any for a cluster-scoped owner)."""
        uid = owner.get("metadata", {}).get("uid")
        namespace = owner.get("metadata", {}).get("namespace") if owner_type.namespaced else None
        order = {key: at for at, key in enumerate(self.store.types)}
        found: list[tuple[int, str, str, ResourceType, Obj]] = []
        for type_key, ns, name in sorted(self._dependents.get(str(uid), ())):
            rtype = self.store.types.get(type_key)
            if rtype is None or (namespace is not None and (not rtype.namespaced or ns != namespace)):
                continue
            try:
                item = self.store.get(rtype, ns, name)
            except NotFoundError:
                continue
            if any(r.get("uid") == uid for r in item.get("metadata", {}).get("ownerReferences") or []):
                found.append((order[type_key], ns, name, rtype, item))
        return [(rtype, item) for *_, rtype, item in sorted(found, key=lambda f: f[:3])]

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
                    self.delete_object(rtype, item)
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

    # -- deletion through the API ------------------------------------------------------------
    def delete_object(self, rtype: ResourceType, item: Obj) -> None:
        """Delete as a controller's API call does: an object with finalizers only gets its
        deletionTimestamp and goes when they are removed."""
        meta = item["metadata"]
        namespace = meta.get("namespace", "") if rtype.namespaced else ""
        try:
            if rtype.key == graceful.PODS:  # controllers delete pods with the pod's own grace period
                graceful.delete_pod(self.store, rtype, self.store.get(rtype, namespace, meta["name"]), {},
                                    self.store.clock)
                return
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    current = self.store.get(rtype, namespace, meta["name"])
                    current["metadata"]["deletionTimestamp"] = now_rfc3339()
                    current["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                    self.store.update(rtype, current)
                return
            self.store.delete(rtype, namespace, meta["name"])
        except NotFoundError:
            return

    # -- namespaces --------------------------------------------------------------------------
    def purge_namespace(self, namespace: str) -> None:
        """Delete every object in a namespace (the namespace controller's job after deletion)."""
        for rtype in list(self.store.types.values()):
            if not rtype.namespaced:
                continue
            items, _ = self.store.list(rtype, namespace)
            for item in items:
                self.delete_object(rtype, item)

    def remaining_content(self, namespace: str) -> tuple[dict[str, int], dict[str, int]]:
        """Objects left in a namespace per `plural.group`, and finalizers left per finalizer name."""
        counts: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for rtype in list(self.store.types.values()):
            if not rtype.namespaced:
                continue
            items, _ = self.store.list(rtype, namespace)
            if items:
                counts[f"{rtype.plural}.{rtype.group}"] = len(items)
            for item in items:
                for name in item["metadata"].get("finalizers") or []:
                    finalizers[name] = finalizers.get(name, 0) + 1
        return counts, finalizers

    def finish_namespace(self, namespace: str) -> bool:
        """Delete a Terminating namespace whose content is gone (True), or record what holds it."""
        counts, finalizers = self.remaining_content(namespace)
        rtype = core("namespaces")
        if not counts:
            self.terminating.discard(namespace)
            with contextlib.suppress(NotFoundError):
                self.store.delete(rtype, "", namespace)
            return True
        try:
            current = self.store.get(rtype, "", namespace)
        except NotFoundError:
            self.terminating.discard(namespace)
            return True
        status = {"phase": "Terminating", "conditions": namespace_conditions(counts, finalizers)}
        if current.get("status") != status:
            current["status"] = status
            with contextlib.suppress(StoreError):
                self.store.update(rtype, current, subresource="status")
        return False

    def _ensure_default_service_account(self, namespace: str) -> None:
        with contextlib.suppress(StoreError):
            self.store.create(core("serviceaccounts"), {"metadata": {"name": "default", "namespace": namespace}})
