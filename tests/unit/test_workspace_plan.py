"""The workspace sync plan (local vs remote vs last-synced state), ignore patterns, path rules and the watch loop
(driven by an injected sleep: no test waits on the clock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from instantstart.cli import sync_plan as sp
from instantstart.cli.workspace import SyncReport, render_report, watch
from instantstart.errors import InvalidInput
from instantstart.workspace_paths import MAX_FILE_BYTES, workspace_path

A, B, C = "a" * 32, "b" * 32, "c" * 32


def lf(md5: str, size: int = 3) -> sp.LocalFile:
    return sp.LocalFile(size, 1, md5)


def rf(etag: str, size: int = 3) -> sp.RemoteFile:
    return sp.RemoteFile(etag, size)


def known(etag: str, md5: str | None = None, **extra: str) -> dict[str, object]:
    return {"etag": etag, "md5": md5 or etag, "size": 3, "mtimeNs": 1, **extra}


@pytest.mark.parametrize(
    ("local", "remote", "state", "kind", "etag"),
    [
        (lf(A), None, None, sp.UPLOAD, None),  # new locally: only where no file is
        (None, rf(A), None, sp.DOWNLOAD, A),  # new remotely
        (lf(A), rf(A), None, sp.SAME, A),  # the same content on both sides at a first sync
        (lf(A), rf(B), None, sp.CONFLICT, B),  # different content at a first sync: keep both
        (lf(A), rf(A), known(A), sp.SAME, A),
        (lf(B), rf(A), known(A), sp.UPLOAD, A),  # changed locally: over the version last seen
        (lf(A), rf(B), known(A), sp.DOWNLOAD, B),  # changed remotely
        (lf(B), rf(C), known(A), sp.CONFLICT, C),  # changed on both sides
        (lf(B), rf(B), known(A), sp.SAME, B),  # changed on both sides to the same content
        (None, rf(A), known(A), sp.DELETE_REMOTE, A),  # deleted locally, unchanged remotely
        (lf(A), None, known(A), sp.DELETE_LOCAL, None),  # deleted remotely, unchanged locally
        (None, rf(B), known(A), sp.DOWNLOAD, B),  # an edit wins over a deletion: nothing lost
        (lf(B), None, known(A), sp.UPLOAD, None),
        (None, None, known(A), sp.FORGET, None),
    ],
)
def test_the_plan_table(local: sp.LocalFile | None, remote: sp.RemoteFile | None, state: dict[str, object] | None,
                        kind: str, etag: str | None) -> None:
    step = sp.plan_path("f.txt", local, remote, state, conflict_kept=False)
    assert (step.kind, step.etag) == (kind, etag), step


def test_a_conflict_stays_pending_until_its_copy_is_deleted_then_the_local_version_goes_up() -> None:
    state = known(B, conflict=sp.conflict_copy("f.txt", B))
    state["md5"] = None
    assert sp.plan_path("f.txt", lf(A), rf(B), state, conflict_kept=True).kind == sp.PENDING
    resolved = sp.plan_path("f.txt", lf(A), rf(B), state, conflict_kept=False)
    assert (resolved.kind, resolved.etag) == (sp.UPLOAD, B)  # conditional on the remote version seen
    assert sp.plan_path("f.txt", lf(A), rf(C), state, conflict_kept=False).kind == sp.CONFLICT  # changed again
    assert sp.conflict_copy("f.txt", "0123456789abcdef-2") == "f.txt.remote-01234567"


def test_plan_skips_big_files_bad_paths_and_leaves_ignored_ones_alone() -> None:
    state = sp.SyncState("s3-claim", "", {"build/old.o": known(A)})
    local = {"big.bin": lf(A, MAX_FILE_BYTES + 1), "ok.txt": lf(A), "x.txt.remote-abcdef12": lf(B)}
    remote = {"build/old.o": rf(A), "a\\b.txt": rf(C), "ok.txt": rf(A)}
    steps = {a.path: a.kind for a in sp.plan(local, remote, state, ["build/"], set())}
    # build/old.o is ignored now: its state entry never turns into a remote deletion.
    assert steps == {"big.bin": sp.SKIP, "ok.txt": sp.SAME, "a\\b.txt": sp.SKIP}


def test_ignore_patterns() -> None:
    patterns = [*sp.DEFAULT_IGNORES, "*.pyc", "logs/", "data/raw/*"]
    assert sp.ignored(".git", patterns, is_dir=True) and sp.ignored(".git/config", patterns)
    assert sp.ignored(sp.STATE_FILE, patterns) and sp.ignored(sp.IGNORE_FILE, patterns)
    assert sp.ignored("pkg/mod.pyc", patterns) and sp.ignored("logs/a.txt", patterns)
    assert sp.ignored("data/raw/x.csv", patterns) and not sp.ignored("data/x.csv", patterns)
    assert not sp.ignored("logs", patterns) and not sp.ignored("src/logs.py", patterns)  # logs/ is a folder
    assert sp.ignored("f.txt.remote-0123abcd", patterns) and not sp.ignored("train.py", patterns)


def test_state_and_ignore_file_round_trip_and_a_state_of_another_claim_is_refused(tmp_path: Path) -> None:
    (tmp_path / sp.IGNORE_FILE).write_text("# build output\n\n*.log\n")
    assert sp.read_ignores(tmp_path)[-1] == "*.log"
    state = sp.SyncState("s3-claim", "code/", {"a.txt": known(A)})
    sp.save_state(tmp_path, state)
    assert sp.load_state(tmp_path, "s3-claim", "code/").files == state.files
    with pytest.raises(ValueError, match="delete the file to start over"):
        sp.load_state(tmp_path, "team-a", "code/")


def test_scan_hashes_files_skips_symlinks_and_reuses_known_hashes(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    (tmp_path / "outside").symlink_to("/etc")
    (tmp_path / "link.py").symlink_to(tmp_path / "src" / "a.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    state = sp.SyncState("s3-claim", "")
    local = sp.scan(tmp_path, sp.read_ignores(tmp_path), state)
    assert set(local) == {"src/a.py"} and local["src/a.py"].md5 == sp.md5_of(tmp_path / "src" / "a.py")
    info = (tmp_path / "src" / "a.py").stat()
    state.files["src/a.py"] = {"md5": A, "size": info.st_size, "mtimeNs": info.st_mtime_ns}
    assert sp.scan(tmp_path, [], state)["src/a.py"].md5 == A  # unchanged size and time: not read again


@pytest.mark.parametrize("bad", ["", "/etc/passwd", "../x", "a/../../b", "a//b", "a/", "./a", "a\\b", "a\x00b",
                                 "x" * 513])
def test_workspace_paths_stay_inside_the_claim(bad: str) -> None:
    with pytest.raises(InvalidInput, match="not a file path inside the claim") as caught:
        workspace_path(bad)
    assert caught.value.details["fields"][0]["field"] == "path" and caught.value.hint
    assert workspace_path("src/train.py") == "src/train.py"


def test_watch_syncs_again_only_when_the_folder_changes_or_the_remote_poll_is_due(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1")
    runs: list[int] = []
    polls: list[float] = []

    def sleep(seconds: float) -> None:  # the injected clock: each poll is one step of the script
        polls.append(seconds)
        if len(polls) == 2:
            (tmp_path / "a.txt").write_text("22")
        if len(polls) == 4:
            (tmp_path / "new.txt").write_text("n")
        if len(polls) == 5:
            (tmp_path / ".git").mkdir()
            (tmp_path / ".git" / "x").write_text("ignored")
            os.utime(tmp_path / "a.txt", ns=(1, (tmp_path / "a.txt").stat().st_mtime_ns))  # same mtime

    syncs = watch(tmp_path, lambda: runs.append(len(polls)), interval=0.5, sleep=sleep, iterations=6)
    assert runs == [0, 2, 4] and syncs == 3 and polls == [0.5] * 6
    runs.clear()
    assert watch(tmp_path, lambda: runs.append(1), interval=1, sleep=lambda s: None, iterations=6,
                 remote_every=3) == 3  # the first sync, then polls 3 and 6 for remote changes


def test_the_report_reads_as_a_plan_and_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    steps = [sp.Action(sp.UPLOAD, "a.py", "new locally"), sp.Action(sp.SAME, "b.py", "unchanged", A),
             sp.Action(sp.CONFLICT, "c.py", "changed on both sides", B)]
    render_report(SyncReport(True, steps), "table")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["would", "upload", "a.py", "(new", "locally)"] and len(lines) == 2
    render_report(SyncReport(False, steps[1:2]), "table")
    assert capsys.readouterr().out.strip() == "in step: nothing to do"
    report = SyncReport(False, steps, {"c.py": "CONFLICT: changed meanwhile"})
    assert report.as_dict()["summary"] == {"upload": 1, "conflict": 1}
    assert report.as_dict()["failed"] == [{"path": "c.py", "error": "CONFLICT: changed meanwhile"}]
