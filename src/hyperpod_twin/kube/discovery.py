"""Discovery documents (/api, /apis, …), /version and a minimal OpenAPI v3 for kubectl and helm."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hyperpod_twin.kube.controllers import CrdInfo
from hyperpod_twin.kube.store import ResourceType
from hyperpod_twin.kube.types import ALL_VERBS, REVIEW_TYPES

Obj = dict[str, Any]
KUBE_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.3-eks-twin", "platform": "linux/amd64"}

# Subresources and the verbs they support.
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "log": ["get"],
    "proxy": ["create", "delete", "get", "patch", "update"],
    "eviction": ["create"],
    "binding": ["create"],
    "finalize": ["update"],
    "token": ["create"],
}


def version_info(minor_version: str = "1.32") -> Obj:
    """The /version document of an EKS cluster on Kubernetes `minor_version` (e.g. 1.32)."""
    minor = minor_version.split(".")[1]
    return {
        **KUBE_VERSION,
        "minor": minor,
        "gitVersion": f"v1.{minor}.3-eks-twin",
        "gitCommit": "0" * 40,
        "gitTreeState": "clean",
        "buildDate": "2025-03-01T00:00:00Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
    }


def group_versions(
    types: list[ResourceType], crds: dict[tuple[str, str], CrdInfo]
) -> dict[str, dict[str, list[ResourceType]]]:
    """group -> version -> types served there (CRDs under each served version)."""
    out: dict[str, dict[str, list[ResourceType]]] = {}
    for rtype in [*types, *REVIEW_TYPES]:
        info = crds.get(rtype.key)
        for version in info.served_versions if info else [rtype.version]:
            out.setdefault(rtype.group, {}).setdefault(version, []).append(rtype)
    return out


def _preferred(versions: list[str]) -> str:
    def rank(v: str) -> tuple[int, int, int]:
        stable = 2 if "alpha" not in v and "beta" not in v else 1 if "beta" in v else 0
        major = int("".join(ch for ch in v[1:].split("a")[0].split("b")[0] if ch.isdigit()) or 0)
        return (stable, major, 0)

    return sorted(versions, key=rank, reverse=True)[0]


def api_versions() -> Obj:
    """/api."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def api_group(group: str, versions: list[str]) -> Obj:
    """One APIGroup entry."""
    preferred = _preferred(versions)
    return {
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
        "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
    }


def api_group_list(gv: dict[str, dict[str, list[ResourceType]]]) -> Obj:
    """/apis."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [api_group(g, sorted(versions)) for g, versions in sorted(gv.items()) if g],
    }


def resource_list(
    group: str, version: str, types: list[ResourceType], crds: dict[tuple[str, str], CrdInfo]
) -> Obj:
    """/api/v1 or /apis/{group}/{version}: an APIResourceList with subresources."""
    resources: list[Obj] = []
    for rtype in sorted(types, key=lambda t: t.plural):
        review = rtype in REVIEW_TYPES
        entry: Obj = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": ["create"] if review else ALL_VERBS,
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        info = crds.get(rtype.key)
        if info and info.categories:
            entry["categories"] = info.categories
        elif rtype.key in {("", "pods"), ("", "services"), ("apps", "deployments"), ("apps", "replicasets"),
                           ("apps", "daemonsets"), ("apps", "statefulsets"), ("batch", "jobs"),
                           ("batch", "cronjobs")}:
            entry["categories"] = ["all"]
        if rtype.key == ("", "namespaces") or rtype.key == ("", "nodes") or rtype.kind == "Event":
            entry["verbs"] = [v for v in ALL_VERBS if not (v == "deletecollection" and rtype.kind == "Namespace")]
        resources.append(entry)
        for sub in rtype.subresources:
            sub_entry: Obj = {
                "name": f"{rtype.plural}/{sub}",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": "Scale" if sub == "scale" else rtype.kind,
                "verbs": SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if sub == "scale":
                sub_entry["group"], sub_entry["version"] = "autoscaling", "v1"
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# -- OpenAPI v3 -------------------------------------------------------------------------------
def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_index(gv: dict[str, dict[str, list[ResourceType]]]) -> Obj:
    """/openapi/v3: the group-version documents and their hash-addressed URLs."""
    paths: Obj = {}
    for group, versions in gv.items():
        for version, types in versions.items():
            rel = _gv_path(group, version)
            digest = hashlib.sha256(
                json.dumps(sorted((t.kind, t.plural, t.namespaced) for t in types)).encode()
            ).hexdigest()[:32].upper()
            paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash={digest}"}
    return {"paths": paths}


def schema_name(rtype: ResourceType, version: str) -> str:
    """Schema key of a kind, in Kubernetes' reverse-DNS style."""
    if not rtype.group:
        return f"io.k8s.api.core.{version}.{rtype.kind}"
    parts = rtype.group.split(".")
    if rtype.group.endswith(".k8s.io") or "." not in rtype.group:
        return f"io.k8s.api.{parts[0]}.{version}.{rtype.kind}"
    return ".".join(reversed(parts)) + f".{version}.{rtype.kind}"


def openapi_v3_document(
    group: str, version: str, types: list[ResourceType], crds: dict[tuple[str, str], CrdInfo]
) -> Obj:
    """One group-version's OpenAPI v3 document: paths whose PATCH carries the GVK and fieldValidation
    (what kubectl checks before trusting server-side validation) and a schema per kind."""
    paths: Obj = {}
    schemas: Obj = {}
    prefix = "/" + _gv_path(group, version)
    field_validation = {
        "name": "fieldValidation",
        "in": "query",
        "description": "How the server treats unknown or duplicate fields (Ignore, Warn, Strict).",
        "schema": {"type": "string", "uniqueItems": True},
    }
    for rtype in types:
        gvk = {"group": group, "version": version, "kind": rtype.kind}
        # Custom resources take no strategic merge patch, and their PATCH says so (kubectl reads it).
        patch_types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        if rtype.key not in crds:
            patch_types.append("application/strategic-merge-patch+json")
        name = schema_name(rtype, version)
        ref = {"$ref": f"#/components/schemas/{name}"}
        content = {"application/json": {"schema": ref}}
        info = crds.get(rtype.key)
        schema: Obj = dict(info.schemas.get(version) or {}) if info else {}
        schema.setdefault("type", "object")
        if info is not None:
            # Custom resources carry their CRD schema. Built-in kinds get no GVK-tagged schema on
            # purpose: kubectl then computes strategic merge patches from its compiled-in types
            # instead of failing to find fields in a schema without properties.
            schema["x-kubernetes-group-version-kind"] = [gvk]
        schemas[name] = schema
        if rtype in REVIEW_TYPES:
            paths[f"{prefix}/{rtype.plural}"] = {
                "post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post",
                         "parameters": [field_validation], "requestBody": {"content": content},
                         "responses": {"201": {"description": "Created", "content": content}}}
            }
            continue
        base = f"{prefix}/namespaces/{{namespace}}/{rtype.plural}" if rtype.namespaced else f"{prefix}/{rtype.plural}"
        item_ops: Obj = {
            "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get",
                    "responses": {"200": {"description": "OK", "content": content}}},
            "put": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "put",
                    "parameters": [field_validation], "requestBody": {"content": content},
                    "responses": {"200": {"description": "OK", "content": content}}},
            "patch": {
                "x-kubernetes-group-version-kind": gvk,
                "x-kubernetes-action": "patch",
                "parameters": [field_validation],
                "requestBody": {"content": {t: {"schema": {"type": "object"}} for t in patch_types}},
                "responses": {"200": {"description": "OK", "content": content}},
            },
            "delete": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "delete",
                       "responses": {"200": {"description": "OK"}}},
        }
        paths[base] = {
            "post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post",
                     "parameters": [field_validation], "requestBody": {"content": content},
                     "responses": {"201": {"description": "Created", "content": content}}},
            "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "list",
                    "responses": {"200": {"description": "OK"}}},
        }
        paths[f"{base}/{{name}}"] = item_ops
        for sub in rtype.subresources:
            if sub in ("status", "scale"):
                paths[f"{base}/{{name}}/{sub}"] = {
                    k: v for k, v in item_ops.items() if k in ("get", "put", "patch")
                }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }
