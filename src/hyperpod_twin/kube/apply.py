"""Server-side apply: merge an applied configuration into the live object and track field managers.

Each applier's fields are recorded in `metadata.managedFields` (FieldsV1 format). A field owned by
another manager with a different value is a conflict (409) unless `force=true`, which takes it over.
Fields this manager applied before but omits now are removed unless another manager owns them.
Plain writes (create, update, patch, scale) record an `Update` entry: the writer takes over the
fields it changed, without conflicts, so a later Apply of another value conflicts with it, as on a
real server. Status writes are not tracked.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from hyperpod_twin.kube.patch import merge_key_for
from hyperpod_twin.kube.status import ApiError

Obj = dict[str, Any]
Path = tuple[str, ...]  # elements "f:<field>" or "k:<json key>"

_SKIP_META = {"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"}


def field_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """Leaf paths set by an applied configuration (keyed list items by their merge key)."""
    paths: set[Path] = set()
    if not isinstance(obj, dict):
        return paths
    for key, value in obj.items():
        if not prefix and key in ("apiVersion", "kind"):
            continue
        if prefix == ("f:metadata",) and key in _SKIP_META:
            continue
        here = (*prefix, f"f:{key}")
        if isinstance(value, dict) and value:
            paths |= field_paths(value, here)
        elif isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
            mkey = merge_key_for(key, value)
            if mkey is None or any(mkey not in i for i in value):
                paths.add(here)
                continue
            for item in value:
                item_path = (*here, "k:" + json.dumps({mkey: item[mkey]}, separators=(",", ":")))
                paths.add((*item_path, "."))
                paths |= field_paths(item, item_path)
        else:
            paths.add(here)
    return paths


def to_fields_v1(paths: set[Path]) -> Obj:
    """FieldsV1 JSON for a set of paths."""
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


def from_fields_v1(fields: Obj, prefix: Path = ()) -> set[Path]:
    """The leaf paths of a FieldsV1 tree."""
    paths: set[Path] = set()
    for key, value in fields.items():
        here = (*prefix, key)
        if isinstance(value, dict) and value:
            paths |= from_fields_v1(value, here)
        else:
            paths.add(here)
    return paths


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """(present, value) of a path in an object."""
    current = obj
    for element in path:
        if element == ".":
            return True, current
        if element.startswith("f:"):
            if not isinstance(current, dict) or element[2:] not in current:
                return False, None
            current = current[element[2:]]
        else:
            key, want = next(iter(json.loads(element[2:]).items()))
            if not isinstance(current, list):
                return False, None
            found = next((i for i in current if isinstance(i, dict) and i.get(key) == want), None)
            if found is None:
                return False, None
            current = found
    return True, current


def remove_path(obj: Any, path: Path) -> None:
    """Delete the field or keyed list item at `path` if present."""
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    present, parent = value_at(obj, path[:-1])
    if not present:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        key, want = next(iter(json.loads(last[2:]).items()))
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == want)]


def apply_merge(live: Any, applied: Any, field: str = "") -> Any:
    """Merge the applied configuration over the live object (maps and keyed lists merge)."""
    if isinstance(applied, dict) and isinstance(live, dict):
        result = copy.deepcopy(live)
        for key, value in applied.items():
            result[key] = apply_merge(live.get(key), value, key)
        return result
    if isinstance(applied, list) and isinstance(live, list) and all(isinstance(i, dict) for i in applied):
        mkey = merge_key_for(field, live + applied)
        if mkey is None or any(mkey not in i for i in applied):
            return copy.deepcopy(applied)
        merged: list[Any] = [copy.deepcopy(i) for i in live]
        for item in applied:
            index = next(
                (n for n, cur in enumerate(merged) if isinstance(cur, dict) and cur.get(mkey) == item[mkey]), None
            )
            if index is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = apply_merge(merged[index], item, "")
        return merged
    return copy.deepcopy(applied)


def _fmt(path: Path) -> str:
    out = ""
    for element in path:
        if element == ".":
            continue
        out += "." + element[2:] if element.startswith("f:") else "[" + element[2:] + "]"
    return out


def server_side_apply(
    live: Obj | None, applied: Obj, manager: str, force: bool, api_version: str, subresource: str = ""
) -> Obj:
    """The object after `manager` applies `applied` to `live` (None when creating)."""
    new_paths = field_paths(applied)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry: Obj = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(new_paths),
    }
    if subresource:
        entry["subresource"] = subresource
    if live is None:
        created = copy.deepcopy(applied)
        created.setdefault("metadata", {})["managedFields"] = [entry]
        return created
    managed: list[Obj] = copy.deepcopy((live.get("metadata") or {}).get("managedFields") or [])
    mine = next(
        (m for m in managed if m.get("manager") == manager and m.get("operation") == "Apply"
         and m.get("subresource", "") == subresource),
        None,
    )
    old_paths = from_fields_v1(mine.get("fieldsV1") or {}) if mine else set()
    others = [m for m in managed if m is not mine]
    conflicts: list[tuple[str, Path]] = []
    for other in others:
        owned = from_fields_v1(other.get("fieldsV1") or {})
        for path in sorted(owned & new_paths):
            if path[-1] == ".":
                continue
            if value_at(live, path) != value_at(applied, path):
                conflicts.append((str(other.get("manager", "")), path))
    if conflicts and not force:
        causes = [
            {"type": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": _fmt(p)}
            for m, p in conflicts
        ]
        listing = "\n".join(f'- conflict with "{m}": {_fmt(p)}' for m, p in conflicts)
        raise ApiError(
            409,
            f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {listing}",
            "Conflict",
            {"causes": causes},
        )
    if conflicts:
        taken = {p for _, p in conflicts}
        for other in others:
            owned = from_fields_v1(other.get("fieldsV1") or {}) - taken
            other["fieldsV1"] = to_fields_v1(owned)
        others = [o for o in others if o.get("fieldsV1")]
    result: Obj = apply_merge(live, applied)
    still_owned: set[Path] = set()
    for other in others:
        still_owned |= from_fields_v1(other.get("fieldsV1") or {})
    # Whole list items first (their "." path), then single fields deepest first.
    for path in sorted(old_paths - new_paths - still_owned, key=lambda p: (p[-1] != ".", -len(p))):
        if path[-1] == "." and any(p[: len(path) - 1] == path[:-1] for p in still_owned | new_paths):
            continue  # someone else still owns fields of this list item
        remove_path(result, path)
        # Maps and lists the removal emptied go too, unless someone still owns something in them.
        parent = path[:-1] if path[-1] != "." else path[:-2]
        while parent:
            present, value = value_at(result, parent)
            owned_below = any(p[: len(parent)] == parent for p in still_owned | new_paths)
            if not present or value or owned_below:
                break
            remove_path(result, parent)
            parent = parent[:-1]
    if mine is not None and mine.get("fieldsV1") == entry["fieldsV1"] and mine.get("apiVersion") == api_version:
        entry["time"] = mine.get("time", entry["time"])  # a no-op apply must not rewrite the object
    # Keep this manager's entry where it was, so re-applying the same config changes nothing.
    position = next((i for i, m in enumerate(managed) if m is mine), len(managed))
    ordered = [m for m in others if managed.index(m) < position] if mine is not None else list(others)
    ordered.append(entry)
    ordered.extend(m for m in others if m not in ordered)
    result.setdefault("metadata", {})["managedFields"] = ordered
    return result


def record_update(old: Obj | None, new: Obj, manager: str, api_version: str) -> list[Obj]:
    """managedFields after `manager` wrote `new` over `old` with a plain (non-apply) write."""
    managed: list[Obj] = copy.deepcopy(((old or {}).get("metadata") or {}).get("managedFields") or [])
    new_paths = field_paths(new)
    if old is None:
        changed, removed = new_paths, set()
    else:
        old_paths = field_paths(old)
        changed = {p for p in new_paths if value_at(new, p) != value_at(old, p)}
        removed = old_paths - new_paths
    if not changed and not removed:
        return managed
    mine = next((m for m in managed if m.get("manager") == manager and m.get("operation") == "Update"
                 and not m.get("subresource")), None)
    out: list[Obj] = []
    for entry in managed:
        if entry is mine:
            continue
        owned = from_fields_v1(entry.get("fieldsV1") or {}) - changed - removed
        if owned:
            out.append({**entry, "fieldsV1": to_fields_v1(owned)})
    owned_mine = (from_fields_v1(mine.get("fieldsV1") or {}) if mine else set()) - removed
    owned_mine |= changed
    if owned_mine and manager:
        out.append({
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(owned_mine),
        })
    return out
