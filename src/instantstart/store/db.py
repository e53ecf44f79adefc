"""The database handle: engine, sessions, SQLite pragmas, and migration to the latest schema."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from instantstart.errors import PreconditionFailed
from instantstart.readonly import refuse_write_sql

MIGRATIONS = Path(__file__).parent / "migrations"
READ_ONLY_OPTION = "instantstart_read_only"
# The PostgreSQL advisory lock replicas starting together take around their migration, so one migrates and the
# others find the schema at head (a transaction-level lock: it goes with the migration's transaction).
MIGRATION_LOCK = 0x1A57A27


class Database:
    """One engine and session factory for a database URL (SQLite in WAL mode, or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {"future": True}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                private_files(Path(parsed.database))
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs["pool_pre_ping"] = True
            kwargs["pool_size"] = 10
            kwargs["max_overflow"] = 30
        self.engine: Engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
            # pysqlite's own transaction handling defers BEGIN; take the write lock at BEGIN instead
            # so concurrent writers queue on busy_timeout rather than failing on lock upgrade. Read
            # sessions (`read_session`) begin DEFERRED: in WAL mode they never wait for a writer or
            # for each other.
            event.listen(self.engine, "begin", _sqlite_begin)
        event.listen(self.engine, "before_cursor_execute", _refuse_in_reads)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(
            self.engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
        )

    def migrate(self) -> None:
        """Bring the schema to the latest Alembic revision (idempotent)."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as connection:
            if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises writers
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            refuse_unknown_revision(_current_revision(connection))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def revisions(self) -> tuple[str | None, str | None]:
        """(the database's Alembic revision, the newest shipped one); connects, so it fails when unreachable."""
        with self.engine.connect() as connection:
            current = _current_revision(connection)
        return current, known_revisions()[-1]

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for reads only: on SQLite it takes no write lock, so reads never queue behind each
        other or behind a writer (WAL readers see the last committed state). Never write through it."""
        session = self._read_sessions()
        try:
            yield session
        finally:
            session.rollback()
            session.close()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def known_revisions() -> list[str]:
    """The Alembic revisions this release ships, oldest first (the last is the head)."""
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return [script.revision for script in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))]


def refuse_unknown_revision(current: str | None) -> None:
    """Refuse a database a newer release migrated (a downgrade of the code): this release cannot read it."""
    known = known_revisions()
    if current is not None and current not in known:
        raise PreconditionFailed(
            f"The database is at schema revision {current}, which this release does not know (its newest is "
            f"{known[-1]}): a newer InstantStart wrote it, and this release refuses to run on it (no downgrades).",
            hint=f"Run the release that wrote revision {current}, or restore a backup taken at revision {known[-1]} "
            "or older with `instantstart db restore PATH`.",
            details={"databaseRevision": current, "releaseRevision": known[-1]},
        )


def _current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def private_files(db_file: Path) -> None:
    """The SQLite file and its -wal/-shm companions readable by their owner only (0600); a directory we
    create for them is 0700. SQLite gives the -wal and -shm files the database file's mode, so creating
    the database file 0600 before SQLite opens it keeps all three private."""
    parent = db_file.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
    fd = os.open(db_file, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for path in (db_file, Path(f"{db_file}-wal"), Path(f"{db_file}-shm"), Path(f"{db_file}-journal")):
        if path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(0o600)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _refuse_in_reads(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
    refuse_write_sql(statement)  # a read-only operation's context: no row may change


def _sqlite_begin(connection: Any) -> None:
    read_only = connection.get_execution_options().get(READ_ONLY_OPTION)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
