"""`instantstart workspace sync`: a local folder and a claim kept in step through the control plane's REST API
(no AWS credentials on the laptop), once, as a dry run, or watching the folder."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from instantstart.cli import sync_plan as sp
from instantstart.client import RestClient
from instantstart.client_config import ClientConfig


class RemoteError(Exception):
    """A refused or failed call: the server's error payload."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.error: dict[str, Any] = payload.get("error", payload)
        super().__init__(f"{self.error.get('code', 'ERROR')}: {self.error.get('message', '')}")


class RemoteFiles:
    """The claim's files through the workspace operations, paths relative to `prefix` of the claim."""

    def __init__(self, client: RestClient, storage: str, prefix: str) -> None:
        self.client, self.storage, self.prefix = client, storage, prefix

    def _call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        failed, payload = self.client.call(name, {"storage": self.storage, **args})
        if failed:
            raise RemoteError(payload)
        return payload

    def list(self) -> dict[str, sp.RemoteFile]:
        """Every file below the prefix (folder markers left out)."""
        found: dict[str, sp.RemoteFile] = {}
        token: str | None = None
        while True:
            args: dict[str, Any] = {"prefix": self.prefix} if self.prefix else {}
            page = self._call("workspace_list_files", {**args, **({"continuationToken": token} if token else {})})
            for f in page["files"]:
                if not f["path"].endswith("/"):
                    found[f["path"][len(self.prefix) :]] = sp.RemoteFile(f["etag"], int(f["size"]))
            token = page.get("nextContinuationToken")
            if not page.get("truncated") or not token:
                return found

    def read(self, path: str) -> tuple[bytes, str]:
        """A file's content and ETag."""
        got = self._call("workspace_read_file", {"path": self.prefix + path})
        return base64.b64decode(got["contentBase64"]), str(got["etag"])

    def write(self, path: str, body: bytes, if_match: str | None) -> str:
        """Write over version `if_match` (None: only where no file is); the new ETag."""
        args = {"path": self.prefix + path, "contentBase64": base64.b64encode(body).decode()}
        return str(self._call("workspace_write_file", {**args, **({"ifMatch": if_match} if if_match else {})})["etag"])

    def delete(self, path: str, if_match: str) -> None:
        """Delete while it is version `if_match`."""
        self._call("workspace_delete_file", {"path": self.prefix + path, "ifMatch": if_match})


@dataclass
class SyncReport:
    """What a sync did (or, as a dry run, would do)."""

    dry_run: bool
    actions: list[sp.Action] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`-o json`)."""
        changes = [a for a in self.actions if a.kind not in (sp.SAME, sp.FORGET)]
        counts: dict[str, int] = {}
        for a in changes:
            counts[a.kind] = counts.get(a.kind, 0) + 1
        return {
            "dryRun": self.dry_run,
            "actions": [{"action": a.kind, "path": a.path, "reason": a.reason} for a in changes],
            "failed": [{"path": p, "error": e} for p, e in sorted(self.failed.items())],
            "summary": counts,
        }


def _inside(root: Path, rel: str) -> Path:
    """The local file for a relative path, refused when any part of it is a symlink (it could lead out of the
    folder: nothing is created, written or deleted through one). Checked before any folder is made."""
    target = root
    for part in rel.split("/"):
        target = target / part
        if target.is_symlink():
            raise ValueError(f"{rel}: {target} is a symlink: not followed, file left alone")
    return target


def _write_local(root: Path, rel: str, body: bytes) -> tuple[int, int]:
    target = _inside(root, rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.instantstart-tmp")
    tmp.write_bytes(body)
    os.replace(tmp, target)
    info = target.stat()
    return info.st_size, info.st_mtime_ns


def _record(md5: str, etag: str, size: int, mtime_ns: int) -> dict[str, Any]:
    return {"etag": etag, "md5": md5, "size": size, "mtimeNs": mtime_ns}


def apply_action(root: Path, remote: RemoteFiles, state: sp.SyncState, a: sp.Action,
                 local: sp.LocalFile | None) -> None:
    """Carry out one step and update the state for its path (raises RemoteError or OSError/ValueError)."""
    files = state.files
    if a.kind == sp.UPLOAD:
        path = _inside(root, a.path)
        info = path.stat()
        body = path.read_bytes()
        etag = remote.write(a.path, body, a.etag)
        files[a.path] = _record(hashlib.md5(body, usedforsecurity=False).hexdigest(), etag, info.st_size,
                                info.st_mtime_ns)
    elif a.kind == sp.DOWNLOAD:
        body, etag = remote.read(a.path)
        size, mtime_ns = _write_local(root, a.path, body)
        files[a.path] = _record(hashlib.md5(body, usedforsecurity=False).hexdigest(), etag, size, mtime_ns)
    elif a.kind == sp.CONFLICT:
        body, etag = remote.read(a.path)
        copy = sp.conflict_copy(a.path, etag)
        _write_local(root, copy, body)
        files[a.path] = {"etag": etag, "md5": None, "conflict": copy}
    elif a.kind == sp.DELETE_REMOTE:
        assert a.etag is not None
        remote.delete(a.path, a.etag)
        files.pop(a.path, None)
    elif a.kind == sp.DELETE_LOCAL:
        path = _inside(root, a.path)
        if sp.md5_of(path) != (files.get(a.path) or {}).get("md5"):
            raise ValueError(f"{a.path} changed locally during the sync: kept; run the sync again")
        path.unlink()
        files.pop(a.path, None)
    elif a.kind == sp.FORGET:
        files.pop(a.path, None)
    elif a.kind == sp.SAME and a.reason == sp.IDENTICAL and local is not None and a.etag is not None:
        files[a.path] = _record(local.md5, a.etag, local.size, local.mtime_ns)  # also ends a resolved conflict


def sync_once(root: Path, remote: RemoteFiles, *, dry_run: bool = False) -> SyncReport:
    """Plan the folder against the claim and, unless `dry_run`, carry the plan out and save the state. A step
    that fails (someone changed the file meanwhile: CONFLICT) is reported and left for the next sync."""
    patterns = sp.read_ignores(root)
    state = sp.load_state(root, remote.storage, remote.prefix)
    local = sp.scan(root, patterns, state)
    kept = {str(f["conflict"]) for f in state.files.values()
            if f.get("conflict") and (root / str(f["conflict"])).is_file()}
    report = SyncReport(dry_run, sp.plan(local, remote.list(), state, patterns, kept))
    if dry_run:
        return report
    for a in report.actions:
        try:
            apply_action(root, remote, state, a, local.get(a.path))
        except RemoteError as exc:
            report.failed[a.path] = str(exc)
        except (OSError, ValueError) as exc:
            report.failed[a.path] = str(exc)
    sp.save_state(root, state)
    return report


def watch(root: Path, run: Callable[[], Any], *, interval: float, sleep: Callable[[float], None] = time.sleep,
          iterations: int | None = None, remote_every: int = 0) -> int:
    """Sync, then poll the folder every `interval` seconds and sync again when a file changed (and every
    `remote_every` polls regardless, for remote changes; 0: never). `iterations` bounds the polls (tests; None:
    until interrupted). How many syncs ran."""
    patterns = sp.read_ignores(root)
    run()
    syncs, polls = 1, 0
    last = sp.snapshot(root, patterns)
    while iterations is None or polls < iterations:
        sleep(interval)
        polls += 1
        now = sp.snapshot(root, sp.read_ignores(root))
        if now != last or (remote_every and polls % remote_every == 0):
            run()
            syncs += 1
            last = sp.snapshot(root, sp.read_ignores(root))
    return syncs


def render_report(report: SyncReport, output: str) -> None:
    """The plan (or what was done) as lines, or JSON."""
    if output == "json":
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    body = report.as_dict()
    verb = "would " if report.dry_run else ""
    for item in body["actions"]:
        typer.echo(f"{verb}{item['action']:<14} {item['path']}  ({item['reason']})")
    for item in body["failed"]:
        typer.echo(f"failed         {item['path']}  ({item['error']})", err=True)
    if not body["actions"]:
        typer.echo("in step: nothing to do")


def add_sync_command(root_app: typer.Typer, config: Callable[[], ClientConfig]) -> None:
    """Attach `instantstart workspace sync` to the workspace group the catalog made."""
    group = next(g.typer_instance for g in root_app.registered_groups if g.name == "workspace")
    assert group is not None

    @group.command("sync")
    def sync(
        folder: Path = typer.Argument(Path("."), help="The local folder (default: here)."),
        storage: str = typer.Option("s3-claim", "--storage", help="The claim (s3_storage_create's name)."),
        prefix: str = typer.Option("", "--prefix", help="Only this folder of the claim, e.g. code/."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing on either side."),
        watch_folder: bool = typer.Option(False, "--watch", help="Keep syncing whenever a local file changes."),
        interval: float = typer.Option(2.0, "--interval", min=0.1, help="With --watch: seconds between polls."),
        remote_every: int = typer.Option(
            15, "--remote-every", min=0, help="With --watch: also sync every N polls for remote changes (0: never)."
        ),
        output: str = typer.Option("table", "-o", "--output", help="Output format: table or json."),
        server: str | None = typer.Option(None, "--server", envvar="INSTANTSTART_SERVER_URL", help="Server URL."),
    ) -> None:
        """Keep a local folder and a claim of the active cluster in step, both ways: new or changed on one side is
        copied; deleted on one side since the last sync is deleted on the other; changed on both keeps both (the
        remote copy as name.remote-<etag8>). State: .instantstart-sync.json in the folder; .instantstartignore
        lists patterns to leave alone. Files of at most 512 KiB. Exit 1 when a step failed."""
        if output not in ("table", "json"):
            raise typer.BadParameter("must be table or json", param_hint="--output")
        if not folder.is_dir():
            raise typer.BadParameter(f"{folder} is not a folder", param_hint="FOLDER")
        sub = prefix.strip("/") + "/" if prefix.strip("/") else ""
        client = RestClient(config(), server)
        remote = RemoteFiles(client, storage, sub)
        failed: list[bool] = []

        def once() -> None:
            report = sync_once(folder, remote, dry_run=dry_run)
            render_report(report, output)
            failed.append(bool(report.failed))

        try:
            if watch_folder and not dry_run:
                watch(folder, once, interval=interval, remote_every=remote_every)
            else:
                once()
        except KeyboardInterrupt:
            pass
        except RemoteError as exc:
            typer.echo(f"{exc.error.get('code')}: {exc.error.get('message')}", err=True)
            if exc.error.get("hint"):
                typer.echo(f"hint: {exc.error['hint']}", err=True)
            raise typer.Exit(1) from None
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        raise typer.Exit(1 if any(failed) else 0)
