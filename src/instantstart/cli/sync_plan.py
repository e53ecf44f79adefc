"""The workspace sync plan: local folder vs claim vs the last-synced state, and which side copies, deletes or
keeps both (pure: no network; the folder is only read)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instantstart.errors import InstantStartError
from instantstart.workspace_paths import MAX_FILE_BYTES, workspace_path

STATE_FILE = ".instantstart-sync.json"
IGNORE_FILE = ".instantstartignore"
DEFAULT_IGNORES = (".git/", STATE_FILE, STATE_FILE + ".*", IGNORE_FILE)
CONFLICT_COPY = re.compile(r"\.remote-[0-9A-Za-z]{8}$")  # name.remote-<etag8>: kept locally, never uploaded

UPLOAD, DOWNLOAD, DELETE_REMOTE, DELETE_LOCAL = "upload", "download", "delete-remote", "delete-local"
CONFLICT, PENDING, SKIP, SAME, FORGET = "conflict", "conflict-pending", "skip", "same", "forget"
IDENTICAL = "identical"


@dataclass(frozen=True)
class LocalFile:
    """A file of the folder: size, modification time and content MD5 (what S3 reports as a single-part ETag)."""

    size: int
    mtime_ns: int
    md5: str


@dataclass(frozen=True)
class RemoteFile:
    """A file of the claim."""

    etag: str
    size: int


@dataclass(frozen=True)
class Action:
    """One step of the plan; `etag` is the remote version it is conditional on (or downloads)."""

    kind: str
    path: str
    reason: str
    etag: str | None = None


@dataclass
class SyncState:
    """What both sides held after the last sync, per path: {etag, md5, size, mtimeNs[, conflict]}."""

    storage: str
    prefix: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


def conflict_copy(path: str, etag: str) -> str:
    """Where the remote version of a conflicting file is kept: `<path>.remote-<first 8 of its ETag>`."""
    return f"{path}.remote-{(etag.replace('-', '') + '00000000')[:8]}"


def load_state(root: Path, storage: str, prefix: str) -> SyncState:
    """The folder's state file (empty on a first sync); refused when it belongs to another claim or prefix."""
    path = root / STATE_FILE
    if not path.exists():
        return SyncState(storage, prefix)
    data = json.loads(path.read_text())
    if (data.get("storage"), data.get("prefix", "")) != (storage, prefix):
        raise ValueError(
            f"{path} records a sync with storage {data.get('storage')!r} prefix {data.get('prefix', '')!r}, not "
            f"{storage!r} {prefix!r}: sync this folder with those options, or delete the file to start over."
        )
    return SyncState(storage, prefix, dict(data.get("files") or {}))


def save_state(root: Path, state: SyncState) -> None:
    """Write the state file atomically (a crash leaves the old one)."""
    tmp = root / f"{STATE_FILE}.tmp"
    body = {"version": 1, "storage": state.storage, "prefix": state.prefix, "files": state.files}
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
    os.replace(tmp, root / STATE_FILE)


def read_ignores(root: Path) -> list[str]:
    """The default patterns plus the folder's .instantstartignore (glob lines; '#' comments; 'dir/' folders)."""
    patterns = list(DEFAULT_IGNORES)
    extra = root / IGNORE_FILE
    if extra.is_file():
        lines = (line.strip() for line in extra.read_text().splitlines())
        patterns.extend(line for line in lines if line and not line.startswith("#"))
    return patterns


def ignored(path: str, patterns: list[str], *, is_dir: bool = False) -> bool:
    """Whether a relative path is ignored: a pattern with a '/' inside matches from the root, one without matches
    any segment; a trailing '/' matches folders only. Conflict copies (name.remote-<etag8>) are always ignored."""
    if not is_dir and CONFLICT_COPY.search(path):
        return True
    segments = path.split("/")
    for raw in patterns:
        dir_only, pattern = raw.endswith("/"), raw.strip("/")
        if "/" in pattern:
            if fnmatch.fnmatchcase(path, pattern) and (is_dir or not dir_only):
                return True
            if any(fnmatch.fnmatchcase("/".join(segments[:i]), pattern) for i in range(1, len(segments))):
                return True
            continue
        folders = segments if is_dir else segments[:-1]
        if any(fnmatch.fnmatchcase(s, pattern) for s in (folders if dir_only else segments)):
            return True
    return False


def md5_of(path: Path) -> str:
    """The hex MD5 of a file's content."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def snapshot(root: Path, patterns: list[str]) -> dict[str, tuple[int, int]]:
    """Relative path → (size, mtime_ns) of every regular, not ignored file (symlinks are skipped): what --watch
    compares between polls, and what the scan hashes."""
    seen: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(folder, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirs[:] = sorted(d for d in dirs if not ignored(rel_dir + d, patterns, is_dir=True)
                         and not os.path.islink(os.path.join(folder, d)))
        for name in files:
            rel, full = rel_dir + name, os.path.join(folder, name)
            if ignored(rel, patterns) or os.path.islink(full):
                continue
            info = os.stat(full)
            seen[rel] = (info.st_size, info.st_mtime_ns)
    return seen


def scan(root: Path, patterns: list[str], state: SyncState) -> dict[str, LocalFile]:
    """The folder's files with their MD5 (reused from the state when size and mtime are unchanged)."""
    local: dict[str, LocalFile] = {}
    for rel, (size, mtime_ns) in snapshot(root, patterns).items():
        known = state.files.get(rel) or {}
        same = known.get("md5") and (known.get("size"), known.get("mtimeNs")) == (size, mtime_ns)
        local[rel] = LocalFile(size, mtime_ns, str(known["md5"]) if same else md5_of(root / rel))
    return local


def _unsyncable(path: str) -> str | None:
    try:
        workspace_path(path)
    except InstantStartError:
        return "not a valid workspace path (kept where it is)"
    return None


def plan_path(path: str, lf: LocalFile | None, rf: RemoteFile | None, known: dict[str, Any] | None,
              conflict_kept: bool) -> Action:
    """The one step for `path` (see docs/WORKSPACE.md for the table)."""
    if known and known.get("conflict") and conflict_kept:
        return Action(PENDING, path, f"resolve, then delete {known['conflict']}", rf.etag if rf else None)
    if lf and rf and lf.md5 == rf.etag:
        return Action(SAME, path, IDENTICAL, rf.etag)
    local_changed = lf is not None and (known is None or lf.md5 != known.get("md5"))
    remote_changed = rf is not None and (known is None or rf.etag != known.get("etag"))
    local_gone, remote_gone = known is not None and lf is None, known is not None and rf is None
    if lf is None and rf is None:
        return Action(FORGET, path, "deleted on both sides")
    if lf and rf and local_changed and remote_changed:
        return Action(CONFLICT, path, "changed on both sides: remote copy kept as " + conflict_copy(path, rf.etag),
                      rf.etag)
    if lf and (local_changed or (rf is None and not remote_gone)):
        # New or changed locally (also over a remote deletion: an edit is never lost to a delete).
        return Action(UPLOAD, path, "changed locally" if known else "new locally", rf.etag if rf else None)
    if rf and (remote_changed or (lf is None and not local_gone)):
        return Action(DOWNLOAD, path, "changed remotely" if known else "new remotely", rf.etag)
    if local_gone and rf:
        return Action(DELETE_REMOTE, path, "deleted locally", rf.etag)
    if remote_gone and lf:
        return Action(DELETE_LOCAL, path, "deleted remotely")
    return Action(SAME, path, "unchanged", rf.etag if rf else None)


def plan(local: dict[str, LocalFile], remote: dict[str, RemoteFile], state: SyncState, patterns: list[str],
         conflict_kept: set[str]) -> list[Action]:
    """Every step, sorted by path; files over the size limit or with a path S3 or the claim refuses are skipped.
    Ignored paths are left alone on both sides (even when the state knows them: ignoring is never deleting).
    `conflict_kept`: the conflict copies still present in the folder."""
    actions: list[Action] = []
    for path in sorted(p for p in set(local) | set(remote) | set(state.files) if not ignored(p, patterns)):
        lf, rf, known = local.get(path), remote.get(path), state.files.get(path)
        why = _unsyncable(path)
        if why:
            actions.append(Action(SKIP, path, why))
            continue
        step = plan_path(path, lf, rf, known, bool(known and known.get("conflict") in conflict_kept))
        big = (lf if step.kind == UPLOAD else rf if step.kind in (DOWNLOAD, CONFLICT) else None)
        if big is not None and big.size > MAX_FILE_BYTES:
            step = Action(SKIP, path, f"{big.size} bytes: the workspace moves files of at most {MAX_FILE_BYTES}")
        actions.append(step)
    return actions
