"""Backups of the control plane's database: SQLite online backup or pg_dump, checked, and restored."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func, inspect, select, update
from sqlalchemy import table as table_clause
from sqlalchemy.engine import make_url

from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.store.db import Database, known_revisions
from instantstart.store.models import OperationRow

ACTIVE = ("PENDING", "RUNNING")
VERSION_TABLE = "alembic_version"


@dataclass
class BackupReport:
    """What a backup holds: its schema revision, rows per table, and the problems found (empty: consistent)."""

    path: str
    revision: str | None
    rows: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the backup opened, its revision is one this release knows and nothing is damaged."""
        return not self.problems


def backup(db: Database, path: Path) -> BackupReport:
    """Write a consistent copy of `db` to `path` while the server may be running (SQLite's online backup API;
    pg_dump's single snapshot in custom format), then check the copy."""
    if path.exists():
        raise InvalidInput(f"{path} exists; the backup never overwrites a file.", hint="Name a new file.")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the copy is as private as the database
    os.close(fd)
    try:
        if db.is_sqlite:
            _sqlite_copy(_sqlite_file(db), str(path))
        else:
            _pg_run(db, ["pg_dump", "--format=custom", "--no-owner", "--file", str(path)])
    except BaseException:
        path.unlink(missing_ok=True)  # no half-written backup left to be mistaken for one
        raise
    return check(db, path)


def check(db: Database, path: Path) -> BackupReport:
    """Open a backup made for `db`'s backend and check it: it opens, its Alembic revision is known to this
    release, SQLite's integrity check passes, and every table's rows are readable (counted)."""
    if not path.is_file():
        raise InvalidInput(f"No backup at {path}.", hint="Name a file written by `instantstart db backup`.")
    report = _inspect_sqlite(path) if db.is_sqlite else _inspect_pg_dump(db, path)
    known = known_revisions()
    if report.revision is None:
        report.problems.append(f"{path} has no schema revision ({VERSION_TABLE} is empty or missing)")
    elif report.revision not in known:
        report.problems.append(
            f"{path} is at schema revision {report.revision}, which this release (revisions {', '.join(known)}) "
            "does not know: it was written by a newer release"
        )
    return report


def restore(db: Database, path: Path) -> BackupReport:
    """Replace `db`'s content with the backup at `path` (the server must be stopped). Refuses a backup that
    fails its check or comes from a newer schema; afterwards compares every table's rows with the backup's and
    frees the leases of the operations that were running, so the next `serve` resumes them at once."""
    report = check(db, path)
    if not report.ok:
        raise PreconditionFailed(
            f"Backup {path} is not restorable: {'; '.join(report.problems)}.",
            hint="Restore it with the release that wrote it, or pick another backup.",
            details={"revision": report.revision},
        )
    db.dispose()
    if db.is_sqlite:
        _sqlite_copy(f"file:{path}?mode=ro", _sqlite_file(db))
    else:
        _pg_run(db, ["pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction", str(path)],
                database=True)
    counts = row_counts(db)
    for table, expected in report.rows.items():
        if counts.get(table) != expected:
            found = counts.get(table)
            report.problems.append(f"table {table}: {found} rows after the restore, {expected} in the backup")
    if not report.ok:
        raise PreconditionFailed(f"Restore of {path} is incomplete: {'; '.join(report.problems)}.",
                                 hint="Restore again; if it repeats, the backup file is damaged.")
    release_leases(db)
    return report


def release_leases(db: Database) -> int:
    """Free the leases of active operations (their owners belong to the process that wrote the backup);
    returns how many operations will resume."""
    with db.session() as session:
        result = session.execute(
            update(OperationRow)
            .where(OperationRow.status.in_(ACTIVE))
            .values(lease_owner=None, lease_token=None, lease_expires_at=None)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]


def row_counts(db: Database) -> dict[str, int]:
    """Rows per table the database has now (the revision table included), read from the database itself: the
    process restoring need not have imported every module that declares a table."""
    counts: dict[str, int] = {}
    with db.engine.connect() as connection:
        for name in inspect(connection).get_table_names():
            counts[name] = int(connection.scalar(select(func.count()).select_from(table_clause(name))) or 0)
    return counts


def _inspect_sqlite(path: Path) -> BackupReport:
    report = BackupReport(str(path), None)
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        report.problems.append(f"{path} does not open as SQLite: {exc}")
        return report
    try:
        verdict = [row[0] for row in connection.execute("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            report.problems.append(f"integrity check: {'; '.join(verdict[:5])}")
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            if not table.startswith("sqlite_"):
                count = f'SELECT count(*) FROM "{table}"'  # noqa: S608 (a table name sqlite_master gave)
                report.rows[table] = int(connection.execute(count).fetchone()[0])
        if VERSION_TABLE in tables:
            found = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            report.revision = found[0] if found else None
    except sqlite3.DatabaseError as exc:
        report.problems.append(f"{path} is not a readable SQLite database: {exc}")
    finally:
        connection.close()
    return report


_COPY = re.compile(r"^COPY (?:\w+\.)?\"?(\w+)\"? \(.*\) FROM stdin;$")


def _inspect_pg_dump(db: Database, path: Path) -> BackupReport:
    """Read the dump's data as pg_restore prints it: each table's COPY block has one line per row."""
    report = BackupReport(str(path), None)
    try:
        script = _pg_run(db, ["pg_restore", "--data-only", "--file", "-", str(path)], capture=True)
    except PreconditionFailed as exc:
        report.problems.append(f"{path} does not open as a pg_dump archive: {exc.message}")
        return report
    table: str | None = None
    for line in script.splitlines():
        if table is None:
            match = _COPY.match(line)
            if match:
                table = match.group(1)
                report.rows[table] = 0
        elif line == "\\.":
            table = None
        else:
            report.rows[table] += 1
            if table == VERSION_TABLE:
                report.revision = line.strip()
    if VERSION_TABLE not in report.rows:
        report.problems.append(f"{path} holds no {VERSION_TABLE} table: not a backup of this control plane")
    return report


def _sqlite_copy(source_uri: str, target_file: str) -> None:
    """SQLite's online backup API: a consistent copy even while other connections write the source."""
    source = sqlite3.connect(source_uri, uri=True)
    target = sqlite3.connect(target_file)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _sqlite_file(db: Database) -> str:
    name = make_url(db.url).database
    if not name or name == ":memory:":
        raise InvalidInput("An in-memory SQLite database cannot be backed up or restored.",
                           hint="Set INSTANTSTART_DATABASE_URL to a file or PostgreSQL database.")
    return name


def _pg_run(db: Database, argv: list[str], *, capture: bool = False, database: bool = False) -> str:
    """Run a PostgreSQL client tool against `db`: the connection goes in PG* environment variables, so the
    password is never on a command line (visible to every user) nor in a message."""
    url = make_url(db.url)
    env = {**os.environ, "PGHOST": url.host or "localhost", "PGPORT": str(url.port or 5432),
           "PGUSER": url.username or "", "PGDATABASE": url.database or ""}
    env.pop("PGPASSWORD", None)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    binary = shutil.which(argv[0])
    if binary is None:
        raise PreconditionFailed(f"{argv[0]} is not installed.",
                                 hint="Install the PostgreSQL client tools (Debian: postgresql-client).")
    if database:
        argv = [*argv[:-1], "--dbname", url.database or "", argv[-1]]
    done = subprocess.run([binary, *argv[1:]], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        error = done.stderr.strip().replace(str(url.password or "\0"), "***")
        raise PreconditionFailed(f"{argv[0]} failed ({done.returncode}): {error[:2000]}",
                                 hint="Check that the database named by INSTANTSTART_DATABASE_URL is reachable.")
    return done.stdout
