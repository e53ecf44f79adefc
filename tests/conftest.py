"""Shared fixtures: databases on SQLite and PostgreSQL, and the real server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test may reach real AWS or any non-loopback address: fake credentials, no instance metadata
# lookups, and an endpoint on a closed loopback port unless a test points AWS at the twin.
os.environ.update(
    {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_REGION": "us-west-2",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "INSTANTSTART_AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    }
)
os.environ.pop("AWS_PROFILE", None)
_HELM = Path(__file__).resolve().parents[1] / ".tools" / "bin" / "helm"
os.environ.setdefault("INSTANTSTART_HELM_PATH", str(_HELM))

from tests.support.policy_plugin import check_at_session_end, order_last, start_call_log  # noqa: E402
from tests.support.schedule import order_longest_first  # noqa: E402

start_call_log()  # before any twin starts: every twin of this session logs its AWS calls there

from tests.support.databases import new_database_url  # noqa: E402 (after the environment is pinned)
from tests.support.servers import Running, thread_server  # noqa: E402
from tests.support.twin import cp, twin, twin_process  # noqa: E402,F401 (fixtures for every test directory)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files longest first (xdist's workers then finish together); the IAM policy test after every test that makes
    the control plane call AWS."""
    order_longest_first(items)
    order_last(config, items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under xdist, the IAM policy against the calls of every worker (see tests/support/policy_plugin.py)."""
    check_at_session_end(session)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend."""
    return new_database_url(request.param, tmp_path)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """An empty SQLite database."""
    return new_database_url("sqlite", tmp_path)


@pytest.fixture
def server(tmp_path: Path, sqlite_url: str) -> Iterator[Running]:
    """The full server on SQLite, in a thread."""
    with thread_server(tmp_path / "data", sqlite_url) as running:
        yield running


@pytest.fixture
def server_any_db(tmp_path: Path, database_url: str) -> Iterator[Running]:
    """The full server on each database backend, in a thread."""
    with thread_server(tmp_path / "data", database_url) as running:
        yield running
