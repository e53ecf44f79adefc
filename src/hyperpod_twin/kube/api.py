"""Resource operations of the twin's API server: get, list, create, update, patch, apply, delete.

This layer turns store operations into what kube-apiserver does around them: defaulting, namespace
checks, optimistic concurrency and patch retries, status/scale subresources, dry runs, finalizers
and deletion propagation.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import copy
import json
import uuid
from dataclasses import replace
from typing import Any

import yaml

from hyperpod_twin.kube import graceful
from hyperpod_twin.kube.apply import record_update, server_side_apply
from hyperpod_twin.kube.defaults import apply_defaults, fold_string_data
from hyperpod_twin.kube.kueue_webhook import suspend_queued
from hyperpod_twin.kube.patch import json_patch, merge_patch, strategic_merge
from hyperpod_twin.kube.priority import admit_priority
from hyperpod_twin.kube.resource_checks import ResourceChecks, Target, WriteOptions
from hyperpod_twin.kube.scale import scale_of, scale_paths
from hyperpod_twin.kube.selectors import combine, parse_field_selector, parse_label_selector
from hyperpod_twin.kube.status import ApiError, not_found
from hyperpod_twin.kube.store import ResourceType, now_rfc3339
from hyperpod_twin.kube.store_errors import NotFoundError, StoreError
from hyperpod_twin.kube.types import core
from hyperpod_twin.kube.validation import prune_unknown

Obj = dict[str, Any]
PROTECTED_NAMESPACES = {"default", "kube-system", "kube-public"}
PATCH_TYPES = {
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
}


class ResourceApi(ResourceChecks):
    """CRUD over one cluster's store with kube-apiserver semantics."""

    # -- reads ---------------------------------------------------------------------------------
    def get(self, target: Target) -> Obj:
        """One object."""
        return self.present(target, self._get(target))

    def list(self, target: Target, params: dict[str, str]) -> tuple[builtins.list[Obj], Obj]:
        """Matching objects (with limit/continue) and the list metadata."""
        predicate = combine(
            parse_label_selector(params.get("labelSelector")),
            parse_field_selector(params.get("fieldSelector"), target.rtype.key),
        )
        items, rv = self.store.list(
            target.rtype, target.namespace if target.rtype.namespaced else None, predicate
        )
        meta: Obj = {"resourceVersion": str(rv)}
        token = params.get("continue")
        if token:
            try:
                start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            except (ValueError, KeyError) as err:
                raise ApiError(400, "continue key is not valid", "BadRequest") from err
            items = [i for i in items if _sort_key(i) > tuple(start)]
        limit = int(params.get("limit") or 0)
        if limit > 0 and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": rv, "start": list(_sort_key(items[-1]))}).encode()
            ).decode()
            meta["remainingItemCount"] = rest
        return [self.present(target, i) for i in items], meta

    # -- writes --------------------------------------------------------------------------------
    def prune(self, target: Target, obj: Obj, opts: WriteOptions, before: Obj | None = None) -> Obj:
        """`obj` without unknown fields; 400 for them under Strict validation, warnings under Warn.

        With `before`, fields already unknown there (written by the simulator, say) are not reported."""
        info = self.control.crds.get(target.rtype.key)
        schema = info.schemas.get(target.version) if info else None
        if info is not None and not schema:
            return obj  # a CRD version without a schema keeps everything
        pruned, unknown = prune_unknown(target.rtype, obj, schema)
        if before is not None:
            known_bad = set(prune_unknown(target.rtype, before, schema)[1])
            unknown = [u for u in unknown if u not in known_bad]
        if unknown and opts.validation == "Strict":
            raise ApiError(
                400,
                f'{target.rtype.kind} in version "{target.version}" cannot be handled as a {target.rtype.kind}: '
                "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown),
                "BadRequest",
            )
        if opts.validation == "Warn":
            opts.warnings.extend(f'unknown field "{u}"' for u in unknown)
        return pruned

    def create(self, target: Target, body: Any, opts: WriteOptions) -> Obj:
        """POST a new object."""
        obj = self.prune(target, self._check_body(target, body), opts)
        obj["apiVersion"], obj["kind"] = target.rtype.api_version, target.rtype.kind
        meta = obj["metadata"]
        for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(server_field, None)
        if not meta.get("name") and not meta.get("generateName"):
            raise ApiError(422, f"{target.rtype.kind} is invalid: metadata.name: Required value: name or "
                           "generateName is required", "Invalid")
        if meta.get("name"):
            self._validate_name(target.rtype, meta["name"])
        self._check_namespace(target)
        apply_defaults(target.rtype, obj, self._ips)
        if target.rtype.key == ("", "pods"):
            admit_priority(self.store, obj)
        suspend_queued(self.store, target.rtype, obj)
        self._admit(target, obj, None, opts)
        if not opts.applying:
            meta["managedFields"] = record_update(None, obj, opts.field_manager, target.api_version)
            if not meta["managedFields"]:
                meta.pop("managedFields")
        if opts.dry_run:
            try:
                self.store.get(target.rtype, meta.get("namespace", ""), meta.get("name", ""))
                raise ApiError(409, f'{target.rtype.plural} "{meta["name"]}" already exists', "AlreadyExists",
                               {"name": meta["name"], "kind": target.rtype.plural})
            except NotFoundError:
                pass
            meta.setdefault("name", meta.get("generateName", "") + uuid.uuid4().hex[:5])
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1)
            return self.present(target, obj)
        try:
            return self.present(target, self.store.create(target.rtype, obj))
        except StoreError as err:
            raise ApiError.from_store(err, target.rtype, meta.get("name", "")) from err

    def update(self, target: Target, body: Any, opts: WriteOptions) -> Obj:
        """PUT a whole object (or its status / scale)."""
        obj = self._check_body(target, body)
        name = obj["metadata"].get("name") or target.name
        if name != target.name:
            raise ApiError(400, "the name of the object does not match the name on the URL", "BadRequest")
        current = self._get(target)
        if target.subresource == "scale":
            return self._write_scale(target, current, obj, opts)
        obj = self.prune(target, obj, opts)
        obj["apiVersion"], obj["kind"] = target.rtype.api_version, target.rtype.kind
        return self.present(target, self._write(target, current, obj, opts))

    def _write(self, target: Target, current: Obj, new: Obj, opts: WriteOptions) -> Obj:
        """Store `new` over `current`, preserving server-owned metadata; finish deletions."""
        meta = new.setdefault("metadata", {})
        cur_meta = current["metadata"]
        for kept in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if kept in cur_meta:
                meta[kept] = cur_meta[kept]
            else:
                meta.pop(kept, None)
        if "managedFields" not in meta and "managedFields" in cur_meta:
            meta["managedFields"] = cur_meta["managedFields"]
        if not opts.applying and target.subresource != "status":
            meta["managedFields"] = record_update(current, new, opts.field_manager, target.api_version)
            if not meta["managedFields"]:
                meta.pop("managedFields")
        if target.rtype.key == ("", "secrets"):
            fold_string_data(new)
        if target.subresource != "status":
            self._admit(target, new, current, opts)
        if opts.dry_run:
            wanted = meta.get("resourceVersion")
            if wanted and str(wanted) != cur_meta["resourceVersion"]:
                raise ApiError(409, f'Operation cannot be fulfilled on {target.rtype.plural} "{target.name}": '
                               "the object has been modified", "Conflict")
            return new
        sub = "status" if target.subresource == "status" else None
        try:
            stored = self.store.update(target.rtype, new, subresource=sub)
        except StoreError as err:
            raise ApiError.from_store(err, target.rtype, target.name or "") from err
        if stored["metadata"].get("deletionTimestamp") and not stored["metadata"].get("finalizers"):
            with contextlib.suppress(NotFoundError):
                self.store.delete(target.rtype, self._ns(target), stored["metadata"]["name"])
        return stored

    def patch(self, target: Target, body: bytes, content_type: str, opts: WriteOptions) -> tuple[int, Obj]:
        """PATCH with any of the four patch types; apply creates when absent (201)."""
        if content_type not in PATCH_TYPES:
            raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                           f"include: {', '.join(sorted(PATCH_TYPES))}", "UnsupportedMediaType")
        if content_type == "application/strategic-merge-patch+json" and target.rtype.group not in _BUILTIN_GROUPS:
            raise ApiError(415, "strategic merge patch is not supported for custom resources; "
                           "use a merge or JSON patch", "UnsupportedMediaType")
        try:
            patch_doc: Any = (
                yaml.safe_load(body) if content_type == "application/apply-patch+yaml" else json.loads(body or b"{}")
            )
        except (ValueError, yaml.YAMLError) as err:
            raise ApiError(400, f"error decoding patch: {err}", "BadRequest") from err
        if content_type == "application/apply-patch+yaml" and not opts.field_manager:
            raise ApiError(422, "PATCH, application/apply-patch+yaml requires fieldManager", "Invalid")
        for _attempt in range(8):
            try:
                current = self.store.get(target.rtype, self._ns(target), target.name or "")
            except NotFoundError as err:
                if content_type != "application/apply-patch+yaml" or target.subresource:
                    raise not_found(target.rtype, target.name or "") from err
                return 201, self._apply_create(target, patch_doc, opts)
            view = self._scale_of(target, current) if target.subresource == "scale" else current
            if content_type == "application/json-patch+json":
                patched = json_patch(view, patch_doc)
            elif content_type == "application/merge-patch+json":
                patched = merge_patch(view, patch_doc)
            elif content_type == "application/strategic-merge-patch+json":
                patched = strategic_merge(view, patch_doc)
            else:
                applied = self.prune(target, self._check_body(target, copy.deepcopy(patch_doc)), opts)
                patched = server_side_apply(
                    view, applied, opts.field_manager, opts.force, target.api_version,
                    target.subresource or "",
                )
            if not isinstance(patched, dict):
                raise ApiError(422, "the patch did not produce an object", "Invalid")
            if target.subresource == "scale":
                return 200, self._write_scale(target, current, patched, opts)
            if content_type != "application/apply-patch+yaml":
                patched = self.prune(target, patched, opts, before=current)
            patched.setdefault("metadata", {})
            patched["metadata"]["name"] = current["metadata"]["name"]
            explicit_rv = _patch_sets_rv(patch_doc)
            if not explicit_rv:
                patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            patched["apiVersion"], patched["kind"] = target.rtype.api_version, target.rtype.kind
            write_opts = replace(opts, applying=content_type == "application/apply-patch+yaml")
            try:
                return 200, self.present(target, self._write(target, current, patched, write_opts))
            except ApiError as err:
                retryable = err.code == 409 and err.reason == "Conflict" and "Apply failed" not in err.message
                if retryable and not explicit_rv:
                    continue  # someone wrote in between: re-read and re-apply, as kube-apiserver does
                raise
        raise ApiError(409, "too many conflicts applying the patch", "Conflict")

    def _apply_create(self, target: Target, patch_doc: Any, opts: WriteOptions) -> Obj:
        applied = self.prune(target, self._check_body(target, copy.deepcopy(patch_doc)), opts)
        if applied["metadata"].get("name") != target.name:
            raise ApiError(400, "the name of the object does not match the name on the URL", "BadRequest")
        created = server_side_apply(None, applied, opts.field_manager, opts.force, target.api_version)
        return self.create(target, created, replace(opts, applying=True))

    # -- scale ---------------------------------------------------------------------------------
    def _scale_paths(self, rtype: ResourceType) -> tuple[builtins.list[str], builtins.list[str], builtins.list[str]]:
        return scale_paths(self.control, rtype)

    def _scale_of(self, target: Target, obj: Obj) -> Obj:
        return scale_of(self.control, target.rtype, obj)

    def get_scale(self, target: Target) -> Obj:
        """GET …/scale."""
        return self._scale_of(target, self._get(target))

    def _write_scale(self, target: Target, current: Obj, scale: Obj, opts: WriteOptions) -> Obj:
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Scale.spec.replicas must be a non-negative integer", "Invalid")
        new = copy.deepcopy(current)
        wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if wanted_rv:
            new["metadata"]["resourceVersion"] = wanted_rv
        spec_path, _, _ = self._scale_paths(target.rtype)
        node = new
        for part in spec_path[:-1]:
            node = node.setdefault(part, {})
        node[spec_path[-1]] = replicas
        main = Target(target.rtype, target.version, target.namespace, target.name)
        return self._scale_of(target, self._write(main, current, new, opts))

    # -- delete --------------------------------------------------------------------------------
    def delete(self, target: Target, options: Obj, opts: WriteOptions) -> tuple[int, Obj]:
        """DELETE one object with propagation, preconditions and finalizers."""
        current = self._get(target)
        meta = current["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise ApiError(409, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                           f"{meta.get('uid')}", "Conflict")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise ApiError(409, "Precondition failed: resourceVersion mismatch", "Conflict")
        rtype = target.rtype
        if rtype.key == ("", "namespaces") and meta["name"] in PROTECTED_NAMESPACES:
            raise ApiError(403, f'namespaces "{meta["name"]}" is forbidden: this namespace may not be deleted',
                           "Forbidden")
        policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else "Background")
        if policy not in ("Foreground", "Background", "Orphan"):
            raise ApiError(400, f"unknown propagationPolicy {policy}", "BadRequest")
        gone = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": meta["name"], "kind": rtype.plural, "uid": meta.get("uid"),
                            **({"group": rtype.group} if rtype.group else {})}}
        if rtype.key == graceful.PODS:  # stored with ReturnDeletedObject: the answer is the pod
            if opts.dry_run:
                return 200, self.present(target, current)
            try:
                _, pod = graceful.delete_pod(self.store, rtype, current, options, self.store.clock)
            except NotFoundError as err:
                raise not_found(rtype, meta["name"]) from err
            return 200, self.present(target, pod)
        if opts.dry_run:
            return 200, gone
        if meta.get("deletionTimestamp"):
            return 202, self.present(target, current)
        if rtype.key == ("", "namespaces"):
            return self._delete_namespace(target, current, gone)
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan":
            self.control.orphan_dependents(current, rtype)
        elif policy == "Foreground":
            meta["deletionTimestamp"] = now_rfc3339()
            meta["finalizers"] = [*finalizers, "foregroundDeletion"]
            marked = self.store.update(rtype, current)
            self._delete_foreground_dependents(current)
            marked = self.store.get(rtype, self._ns(target), meta["name"])
            marked["metadata"]["finalizers"] = [f for f in marked["metadata"]["finalizers"]
                                                if f != "foregroundDeletion"]
            result = self._write(target, marked, marked, WriteOptions())
            if result["metadata"].get("finalizers"):
                return 202, self.present(target, result)
            return 200, gone
        if finalizers:
            meta["deletionTimestamp"] = now_rfc3339()
            return 202, self.present(target, self.store.update(rtype, current))
        try:
            self.store.delete(rtype, self._ns(target), meta["name"])
        except NotFoundError as err:
            raise not_found(rtype, meta["name"]) from err
        return 200, gone

    def _delete_namespace(self, target: Target, current: Obj, gone: Obj) -> tuple[int, Obj]:
        """Terminating until the namespace controller has removed the content (finalizers hold it)."""
        rtype, name = target.rtype, current["metadata"]["name"]
        stamp = now_rfc3339()
        current["status"] = {"phase": "Terminating"}
        self.store.update(rtype, current, subresource="status")
        current = self.store.get(rtype, "", name)
        current["metadata"]["deletionTimestamp"] = stamp
        current.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        self.store.update(rtype, current)
        self.control.terminating.add(name)
        self.control.purge_namespace(name)
        if self.control.finish_namespace(name):
            return 200, gone
        return 200, self.present(target, self.store.get(rtype, "", name))

    def _delete_foreground_dependents(self, owner: Obj) -> None:
        for rtype, item in self.control.dependents(owner, self.store.type_for(owner["apiVersion"], owner["kind"])
                                                   or core("pods")):
            ns = item["metadata"].get("namespace")
            sub = Target(rtype, rtype.version, ns, item["metadata"]["name"])
            with contextlib.suppress(ApiError):
                self.delete(sub, {"propagationPolicy": "Foreground"}, WriteOptions())

    def delete_collection(self, target: Target, params: dict[str, str], options: Obj, opts: WriteOptions) -> Obj:
        """DELETE a collection (with selectors); returns the deleted objects."""
        items, meta = self.list(target, {k: v for k, v in params.items() if k not in ("limit", "continue")})
        deleted = []
        for item in items:
            sub = Target(target.rtype, target.version, item["metadata"].get("namespace"), item["metadata"]["name"])
            try:
                self.delete(sub, options, opts)
                deleted.append(item)
            except ApiError as err:
                if err.code != 404:
                    raise
        return {"kind": target.rtype.list_kind, "apiVersion": target.api_version, "metadata": meta,
                "items": deleted}


_BUILTIN_GROUPS = {
    "", "apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "storage.k8s.io",
    "coordination.k8s.io", "scheduling.k8s.io", "policy", "networking.k8s.io", "autoscaling",
    "discovery.k8s.io", "events.k8s.io", "admissionregistration.k8s.io", "apiregistration.k8s.io",
}


def _sort_key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _patch_sets_rv(patch_doc: Any) -> bool:
    if isinstance(patch_doc, dict):
        return bool((patch_doc.get("metadata") or {}).get("resourceVersion"))
    if isinstance(patch_doc, list):
        return any(isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in patch_doc)
    return False
