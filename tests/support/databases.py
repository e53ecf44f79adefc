"""Databases for tests: a fresh SQLite file or a fresh database on the throwaway PostgreSQL server."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

PG_ENV = "INSTANTSTART_TEST_PG_URL"


def pg_admin_url() -> str | None:
    """The admin URL of the throwaway server, if `make test` (scripts/with_postgres.py) started one."""
    return os.environ.get(PG_ENV)


def require_pg() -> str:
    """The admin URL, or skip (fail when INSTANTSTART_REQUIRE_PG=1, as under make test)."""
    url = pg_admin_url()
    if url is None:
        if os.environ.get("INSTANTSTART_REQUIRE_PG") == "1":
            pytest.fail(f"{PG_ENV} is not set but PostgreSQL tests are required")
        pytest.skip("no PostgreSQL server: run through `make test`")
    return url


def new_database_url(backend: str, tmp_path: Path) -> str:
    """A URL to an empty database of `backend` ("sqlite" or "postgres")."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    admin = require_pg()
    name = "t_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin.rsplit("/", 1)[0] + "/" + name
