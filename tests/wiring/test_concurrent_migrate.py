"""Replicas starting together on one empty database: each migrates, one at a time (PostgreSQL's advisory lock,
SQLite's write lock), and every one finds the schema at head."""

from __future__ import annotations

import threading

from instantstart.store.db import Database


def test_replicas_migrating_one_empty_database_at_once_all_succeed(database_url: str) -> None:
    databases = [Database(database_url) for _ in range(4)]
    start = threading.Barrier(len(databases))
    failures: list[BaseException] = []

    def migrate(db: Database) -> None:
        start.wait()
        try:
            db.migrate()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=migrate, args=(db,), daemon=True) for db in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not [t for t in threads if t.is_alive()], "a migration is still waiting (a lock never granted)"
    assert not failures, failures
    for db in databases:
        current, newest = db.revisions()
        assert current == newest
        db.engine.dispose()
