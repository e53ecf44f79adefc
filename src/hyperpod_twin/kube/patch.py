"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and Kubernetes strategic merge patch."""

from __future__ import annotations

import copy
from typing import Any

from hyperpod_twin.kube.status import ApiError

# List fields merged by a key instead of replaced, as the Go types' patchMergeKey tags say.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "tolerations": "key",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "readinessGates": "conditionType",
    "resourceClaims": "name",
    "ports": "containerPort",  # service ports use "port"; see merge_key_for
}
# Lists of scalars merged as sets (patchStrategy "merge" on a primitive list).
PRIMITIVE_MERGE = {"finalizers"}


def merge_key_for(field: str, items: list[Any]) -> str | None:
    """The merge key of list field `field`, looking at its items to tell container from service ports."""
    key = MERGE_KEYS.get(field)
    if field == "ports" and any(isinstance(i, dict) and "containerPort" not in i and "port" in i for i in items):
        return "port"
    return key


# -- JSON merge patch ---------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- JSON patch -----------------------------------------------------------------------------------
def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}", "Invalid")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError) as err:
                raise ApiError(422, f"index {part} out of range", "Invalid") from err
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise ApiError(422, f"doc is missing path: /{'/'.join(parts)}", "Invalid")
    return doc


def _add(doc: Any, parts: list[str], value: Any, replace: bool) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
            return doc
        try:
            index = int(last)
        except ValueError as err:
            raise ApiError(422, f"invalid list index {last!r}", "Invalid") from err
        if replace:
            if not 0 <= index < len(parent):
                raise ApiError(422, f"index {index} out of range", "Invalid")
            parent[index] = value
        else:
            if not 0 <= index <= len(parent):
                raise ApiError(422, f"index {index} out of range", "Invalid")
            parent.insert(index, value)
    elif isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"replace operation does not apply: doc is missing key: {last}", "Invalid")
        parent[last] = value
    else:
        raise ApiError(422, "cannot add to a scalar", "Invalid")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise ApiError(422, "cannot remove the whole document", "Invalid")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError) as err:
            raise ApiError(422, f"index {last} out of range", "Invalid") from err
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    raise ApiError(422, f"remove operation does not apply: doc is missing path: /{'/'.join(parts)}", "Invalid")


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(operations, list):
        raise ApiError(400, "a JSON patch must be a list of operations", "BadRequest")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid JSON patch operation {op!r}", "BadRequest")
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace"):
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, parts)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, source))
            if kind == "move":
                _remove(doc, source)
            doc = _add(doc, parts, value, replace=False)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise ApiError(422, f"testing value {op['path']} failed", "Invalid")
        else:
            raise ApiError(400, f"unknown JSON patch operation {kind!r}", "BadRequest")
    return doc


# -- strategic merge patch --------------------------------------------------------------------------
def strategic_merge(original: Any, patch: Any) -> Any:
    """Apply a strategic merge patch: maps merge, keyed lists merge by their merge key, with the
    $patch, $retainKeys, $setElementOrder and $deleteFromPrimitiveList directives."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(original, dict):
        original = {}
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    result = copy.deepcopy(original)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(field, result[field], order)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, original: Any, patch: list[Any]) -> list[Any]:
    original = original if isinstance(original, list) else []
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    if field in PRIMITIVE_MERGE:
        merged = list(original)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = merge_key_for(field, original + patch)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [_strip(i) for i in patch]
    result: list[Any] = copy.deepcopy(original)
    for item in patch:
        match = next(
            (i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item.get(key)), None
        )
        if item.get("$patch") == "delete":
            if match is not None:
                del result[match]
            continue
        if match is None:
            result.append(_strip(item))
        else:
            result[match] = strategic_merge(result[match], item)
    return result


def _reorder(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    if all(not isinstance(i, dict) for i in items):
        position = {v: n for n, v in enumerate(order) if not isinstance(v, dict | list)}
        return sorted(items, key=lambda v: position.get(v, len(order)))
    key = merge_key_for(field, items)
    if key is None:
        return items
    position = {o.get(key): n for n, o in enumerate(order) if isinstance(o, dict)}
    return sorted(items, key=lambda i: position.get(i.get(key) if isinstance(i, dict) else None, len(order)))


def _strip(value: Any) -> Any:
    """Remove patch directives from a value that is inserted as is."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if not k.startswith("$patch") and not k.startswith("$setElementOrder/")
            and not k.startswith("$retainKeys") and not k.startswith("$deleteFromPrimitiveList/")
        }
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
