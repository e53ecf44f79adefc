"""Unknown fields: pruned on write as kube-apiserver does, reported per `fieldValidation`.

Built-in kinds are checked against the official Python client's models (their attribute maps are
the API's JSON field names, kept current by its generator); custom resources against the CRD's
structural schema, honouring `x-kubernetes-preserve-unknown-fields`. A real server decodes
built-ins into Go structs and prunes custom resources by schema, so unknown fields never reach
storage; with `fieldValidation=Strict` (what kubectl sends) the write fails with 400, with `Warn`
(the default) it succeeds with a `Warning` header per field.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import kubernetes.client.models as models

from hyperpod_twin.kube.store import ResourceType

Obj = dict[str, Any]
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_ROOT_KEYS = {"apiVersion", "kind", "metadata"}


@cache
def _fields_of(type_name: str) -> dict[str, str] | None:
    """JSON field name -> type string of a client model, or None when the type is opaque."""
    model = getattr(models, type_name, None)
    if model is None or not hasattr(model, "attribute_map"):
        return None
    return {json_name: model.openapi_types[attr] for attr, json_name in model.attribute_map.items()}


def model_name(rtype: ResourceType) -> str:
    """The client model class of a built-in kind: V1Deployment, V2HorizontalPodAutoscaler, or with
    the group as prefix where kinds collide (CoreV1Event, EventsV1Event)."""
    plain = rtype.version[0].upper() + rtype.version[1:] + rtype.kind
    prefix = (rtype.group.split(".")[0] or "core").capitalize()
    for name in (plain, prefix + plain):
        if _fields_of(name) is not None:
            return name
    return plain


def _prune_model(value: Any, type_name: str, path: str, unknown: list[str]) -> Any:
    list_match, dict_match = _LIST.match(type_name), _DICT.match(type_name)
    if list_match and isinstance(value, list):
        return [_prune_model(v, list_match.group(1), f"{path}[{i}]", unknown) for i, v in enumerate(value)]
    if dict_match and isinstance(value, dict):
        return {k: _prune_model(v, dict_match.group(1), f"{path}.{k}", unknown) for k, v in value.items()}
    fields = _fields_of(type_name)
    if fields is None or not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key not in fields:
            unknown.append(child)
            continue
        out[key] = _prune_model(item, fields[key], child, unknown)
    return out


def _prune_schema(value: Any, schema: Obj, path: str, unknown: list[str], root: bool = False) -> Any:
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune_schema(v, schema["items"], f"{path}[{i}]", unknown) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    declared = schema.get("properties")
    properties: Obj = declared if isinstance(declared, dict) else {}
    extra = schema.get("additionalProperties")
    if declared is None and extra is not None:
        if isinstance(extra, dict):
            return {k: _prune_schema(v, extra, f"{path}.{k}", unknown) for k, v in value.items()}
        return value
    if declared is None and not root:
        return value
    out = {}
    embedded = schema.get("x-kubernetes-embedded-resource")
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if (root or embedded) and key in _ROOT_KEYS:
            out[key] = item
        elif key in properties:
            out[key] = _prune_schema(item, properties[key], child, unknown)
        elif isinstance(extra, dict):
            out[key] = _prune_schema(item, extra, child, unknown)
        elif extra is True:
            out[key] = item
        else:
            unknown.append(child)
    return out


def prune_unknown(rtype: ResourceType, obj: Obj, crd_schema: Obj | None) -> tuple[Obj, list[str]]:
    """The object without fields its kind does not have, and the dotted paths of those fields."""
    unknown: list[str] = []
    if crd_schema is not None:
        pruned = _prune_schema(obj, crd_schema, "", unknown, root=True)
        if isinstance(obj.get("metadata"), dict):
            pruned["metadata"] = _prune_model(obj["metadata"], "V1ObjectMeta", "metadata", unknown)
        return pruned, unknown
    if _fields_of(model_name(rtype)) is None:
        return obj, unknown
    return _prune_model(obj, model_name(rtype), "", unknown), unknown
