"""Backup -> destroy -> restore -> resume on each database; the previous release's database resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from instantstart.errors import PreconditionFailed
from instantstart.store.backup import backup
from instantstart.store.db import Database, known_revisions
from instantstart.store.models import OperationRow
from tests.support.previous_release import FIXTURE, OPERATION_ID, point_journal, write_previous_release
from tests.support.servers import CHILD_PYTHONPATH, REPO, process_server
from tests.support.waits import probe_held_in_beta, wait_terminal


def db_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`instantstart db ARGS` as the operator runs it, with the server's settings in the environment."""
    return subprocess.run(
        [sys.executable, "-m", "instantstart.cli.main", "db", *args],
        env={**env, "PYTHONPATH": CHILD_PYTHONPATH}, cwd=REPO, capture_output=True, text=True, timeout=120,
        check=False,
    )


def server_env(data: Path, url: str) -> dict[str, str]:
    return {**os.environ, "INSTANTSTART_DATA_DIR": str(data), "INSTANTSTART_DATABASE_URL": url}


def revisions(url: str) -> tuple[str | None, str | None]:
    """The database's revision and the head; the connection closed again (SQLite shares per-file state inside a
    process: a connection left open on a deleted file would confuse a later file given the same inode)."""
    db = Database(url)
    try:
        return db.revisions()
    finally:
        db.dispose()


def destroy(url: str) -> None:
    """Lose the database: the SQLite files deleted, or every PostgreSQL table dropped."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{parsed.database}{suffix}").unlink(missing_ok=True)
        return
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("DROP SCHEMA public CASCADE"))
        conn.execute(sa.text("CREATE SCHEMA public"))
    engine.dispose()


def test_backup_destroy_restore_resumes_the_running_operation(tmp_path: Path, database_url: str) -> None:
    data, journal, gate = tmp_path / "data", tmp_path / "journal", tmp_path / "open-the-gate"
    saved = tmp_path / "backups" / "state.backup"
    env = server_env(data, database_url)
    with process_server(data, database_url) as (running, proc):
        operation_id = probe_held_in_beta(running, journal, gate)
        done = db_cli(env, "backup", str(saved))  # online: the server is running and holds beta's lease
        assert done.returncode == 0, done.stderr
        written = json.loads(done.stdout)
        assert written["problems"] == [] and written["revision"] == known_revisions()[-1]
        assert written["rows"]["operations"] == 1
        assert oct(saved.stat().st_mode & 0o777) == "0o600"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    destroy(database_url)
    assert db_cli(env, "check", str(saved)).returncode == 0
    done = db_cli(env, "restore", str(saved))
    assert done.returncode == 0, done.stderr
    restored, ledger = done.stdout.split('\n{\n  "ledger"', 1)
    assert json.loads(restored)["verdict"] == "restored"
    no_findings = {"clusters": 0, "orphans": [], "phantoms": [], "unchecked": []}
    assert json.loads('{"ledger"' + ledger) == {"ledger": no_findings}
    db = Database(database_url)
    with db.session() as session:
        row = session.get(OperationRow, operation_id)
        assert row is not None and row.status == "RUNNING"
        assert (row.lease_owner, row.lease_expires_at) == (None, None), "the dead server's lease is freed"
    db.dispose()
    gate.touch()
    with process_server(data, database_url) as (restarted, _proc), restarted.client() as client:
        view = wait_terminal(client, operation_id, timeout=60)
    assert view["status"] == "SUCCEEDED", view
    effects = sorted(p.name for p in journal.glob("effect-*"))
    assert effects == [f"effect-{s}" for s in ("alpha", "beta", "delta", "gamma")]
    executions = [line.split()[0] for line in (journal / "executions.log").read_text().splitlines()]
    assert executions == ["alpha", "beta", "beta", "gamma", "delta"], "beta resumed after the restore, alpha not rerun"


def test_previous_release_database_is_migrated_and_its_operation_resumed(tmp_path: Path, database_url: str) -> None:
    if database_url.startswith("sqlite"):
        shutil.copyfile(FIXTURE, sa.engine.make_url(database_url).database or "")
    else:
        write_previous_release(database_url)  # the same writer that made the committed SQLite fixture
    assert revisions(database_url) == ("0003", known_revisions()[-1])
    journal = tmp_path / "journal"
    point_journal(database_url, journal)
    with process_server(tmp_path / "data", database_url) as (running, _proc), running.client() as client:
        view = wait_terminal(client, OPERATION_ID, timeout=60)
    assert view["status"] == "SUCCEEDED", view
    assert [s["attempts"] for s in view["stages"]] == [1, 2, 1, 1]
    executions = [line.split()[0] for line in (journal / "executions.log").read_text().splitlines()]
    assert executions == ["beta", "gamma", "delta"], "alpha, done by the previous release, is not rerun"
    assert revisions(database_url) == (known_revisions()[-1], known_revisions()[-1])


def test_a_database_from_a_newer_release_is_refused_at_start(tmp_path: Path, sqlite_url: str) -> None:
    db = Database(sqlite_url)
    db.migrate()
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(PreconditionFailed) as raised:
        db.migrate()
    head = known_revisions()[-1]
    assert "0099" in raised.value.message and head in raised.value.message
    assert "instantstart db restore" in raised.value.hint
    db.dispose()
    serve = subprocess.run(
        [sys.executable, "-m", "instantstart.cli.main", "serve"],
        env={**server_env(tmp_path / "data", sqlite_url), "PYTHONPATH": CHILD_PYTHONPATH}, cwd=REPO,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert serve.returncode == 2, serve.stderr
    assert "schema revision 0099" in serve.stderr and f"its newest is {head}" in serve.stderr
    assert "hint: Run the release that wrote revision 0099" in serve.stderr


def test_restore_refuses_a_backup_from_a_newer_schema_and_a_damaged_file(tmp_path: Path, sqlite_url: str) -> None:
    env = server_env(tmp_path / "data", sqlite_url)
    db = Database(sqlite_url)
    db.migrate()
    db.dispose()
    saved = tmp_path / "state.backup"
    assert db_cli(env, "backup", str(saved)).returncode == 0
    assert db_cli(env, "backup", str(saved)).returncode == 1, "an existing file is never overwritten"
    with sqlite3.connect(saved) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    conn.close()
    checked = db_cli(env, "check", str(saved))
    assert checked.returncode == 1 and "0099" in checked.stdout and "newer release" in checked.stdout
    refused = db_cli(env, "restore", str(saved))
    assert refused.returncode == 1 and "not restorable" in refused.stderr and "0099" in refused.stderr
    damaged = tmp_path / "damaged.backup"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    checked = db_cli(env, "check", str(damaged))
    assert checked.returncode == 1 and json.loads(checked.stdout)["problems"]
    assert revisions(sqlite_url)[0] == known_revisions()[-1], "the database was left as it was"


def test_pg_tools_get_the_password_through_the_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pg_dump sees the password in PGPASSWORD, never in its arguments (visible to every local user in ps);
    its failure is reported without it. A recording pg_dump stands first on PATH."""
    seen = tmp_path / "seen"
    tool = tmp_path / "bin" / "pg_dump"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\necho "argv: $*" > {seen}\n'
                    f'echo "env: $PGUSER@$PGHOST:$PGPORT/$PGDATABASE $PGPASSWORD" >> {seen}\n'
                    'echo "connection refused for s3cret-pw" >&2\nexit 1\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    db = Database("postgresql+psycopg://ops:s3cret-pw@127.0.0.1:5439/control")
    with pytest.raises(PreconditionFailed) as raised:
        backup(db, tmp_path / "out.backup")
    assert not (tmp_path / "out.backup").exists(), "no half-written backup is left behind"
    argv, env = seen.read_text().splitlines()
    assert "s3cret-pw" not in argv and "--format=custom" in argv
    assert env == "env: ops@127.0.0.1:5439/control s3cret-pw"
    assert "pg_dump failed" in raised.value.message and "s3cret-pw" not in raised.value.message
    db.dispose()
