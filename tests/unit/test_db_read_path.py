"""SQLite read path: read sessions take no write lock, so a read never waits for a writer or another read."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event, text

from instantstart.store.db import Database


def test_a_read_session_does_not_wait_for_a_transaction_holding_the_write_lock(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'state.db'}")
    db.migrate()
    statements: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda _c, _cur, stmt, *_a: statements.append(stmt))
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.session() as session:
            session.execute(text("SELECT 1"))
            holding.set()
            release.wait(120)  # outlasts busy_timeout (30 s): a read queued behind it would fail

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(60)
        with db.read_session() as session:
            assert session.execute(text("SELECT count(*) FROM sqlite_master")).scalar()
        # The read answered while the writer still held its transaction (it holds until released below): it did
        # not queue behind it (that would end in "database is locked" after busy_timeout, the writer outlasting it).
        assert thread.is_alive() and not release.is_set()
    finally:
        release.set()
        thread.join()
    assert statements[0] == "BEGIN IMMEDIATE" and "BEGIN" in statements[2:]
    assert "BEGIN IMMEDIATE" not in statements[2:]
    db.dispose()
