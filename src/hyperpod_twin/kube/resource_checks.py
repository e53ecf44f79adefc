"""What a resource request addresses (Target, WriteOptions) and the checks every API server operation shares."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from hyperpod_twin.kube.admission import check_builtin, check_custom
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.status import ApiError, not_found
from hyperpod_twin.kube.store import ObjectStore, ResourceType
from hyperpod_twin.kube.store_errors import NotFoundError
from hyperpod_twin.kube.types import core

Obj = dict[str, Any]
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass
class Target:
    """What a resource URL addresses."""

    rtype: ResourceType
    version: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None
    rest: str = ""

    @property
    def api_version(self) -> str:
        """apiVersion as the URL's version names it."""
        return f"{self.rtype.group}/{self.version}" if self.rtype.group else self.version


@dataclass
class WriteOptions:
    """Query options shared by writes."""

    dry_run: bool = False
    field_manager: str = ""
    force: bool = False
    applying: bool = False  # a server-side apply: managedFields are already computed
    validation: str = "Warn"  # fieldValidation: Strict (400 on unknown fields), Warn, Ignore
    warnings: list[str] = field(default_factory=list)  # shared by copies made with replace()


class ResourceChecks:
    """The store, the control plane, and the lookups and checks the resource operations share."""
    def __init__(self, store: ObjectStore, control: ControlPlane) -> None:
        self.store = store
        self.control = control
        self._ips = itertools.count(10)

    def present(self, target: Target, obj: Obj) -> Obj:
        """The object as the requested version shows it (CRD versions convert with strategy None)."""
        if target.version != target.rtype.version:
            obj = dict(obj)
            obj["apiVersion"] = target.api_version
        return obj

    def _ns(self, target: Target) -> str:
        return (target.namespace or "") if target.rtype.namespaced else ""

    def _get(self, target: Target, name: str | None = None) -> Obj:
        name = name or target.name or ""
        try:
            return self.store.get(target.rtype, self._ns(target), name)
        except NotFoundError as err:
            raise not_found(target.rtype, name) from err

    def _check_namespace(self, target: Target) -> None:
        if not target.rtype.namespaced:
            return
        try:
            ns = self.store.get(core("namespaces"), "", target.namespace or "default")
        except NotFoundError as err:
            raise not_found(core("namespaces"), target.namespace or "default") from err
        if ns.get("metadata", {}).get("deletionTimestamp") or ns.get("status", {}).get("phase") == "Terminating":
            raise ApiError(
                403,
                f"{target.rtype.plural} is forbidden: unable to create new content in namespace "
                f"{ns['metadata']['name']} because it is being terminated",
                "Forbidden",
            )

    def _check_body(self, target: Target, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise ApiError(400, "the body of the request was not an object", "BadRequest")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != target.api_version:
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({target.api_version})",
                "BadRequest",
            )
        if kind and kind != target.rtype.kind:
            raise ApiError(
                400, f"the kind in the data ({kind}) does not match the expected kind ({target.rtype.kind})"
            )
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object", "BadRequest")
        if target.rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and target.namespace and body_ns != target.namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                    "BadRequest",
                )
            meta["namespace"] = target.namespace or body_ns or "default"
        return obj

    @staticmethod
    def _validate_name(rtype: ResourceType, name: str) -> None:
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise ApiError(
                422,
                f'{rtype.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a lowercase RFC 1123 '
                "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and "
                "end with an alphanumeric character",
                "Invalid",
                {"name": name, "kind": rtype.kind},
            )

    def _admit(self, target: Target, new: Obj, current: Obj | None, opts: WriteOptions) -> None:
        """Schema / CEL / registry-strategy validation of a write (422 Invalid)."""
        info = self.control.crds.get(target.rtype.key)
        if info is not None:
            schema = info.schemas.get(target.version) or info.schemas.get(target.rtype.version)
            check_custom(target.rtype, schema, new, current, opts.warnings)
        else:
            check_builtin(target.rtype, new, current)
