"""Files (data dir 0700, SQLite and WAL 0600, token mode checked), the per-client sign-in limiter, bounded
caches, CORS preflights before auth, and the EKS endpoint default."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from instantstart.api.app import create_app
from instantstart.auth import InsecureFileMode
from instantstart.describe_cache import DescribeCache
from instantstart.services.cluster.eks_control_plane import endpoint_access
from instantstart.settings import Settings
from instantstart.web.routes import FailureLimiter
from tests.support.servers import REPO, Running, thread_server


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_data_dir_database_and_wal_are_private(server: Running, tmp_path: Path) -> None:
    with server.client() as client:
        assert client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "j")}).status_code == 202
    assert mode(server.data_dir) == 0o700
    assert mode(server.data_dir / "api-token") == 0o600
    db_files = list(tmp_path.glob("*.db*")) + list(server.data_dir.glob("*.db*"))
    assert any(p.name.endswith("-wal") for p in db_files), db_files
    assert db_files and all(mode(p) == 0o600 for p in db_files), {p.name: oct(mode(p)) for p in db_files}


def test_a_readable_token_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    token = data / "api-token"
    token.write_text("a-token-that-others-can-read\n")
    token.chmod(0o644)
    with pytest.raises(InsecureFileMode, match="chmod 600"):
        create_app(Settings(data_dir=data, database_url=f"sqlite:///{tmp_path / 's.db'}"))
    env = {
        **os.environ,
        "INSTANTSTART_DATA_DIR": str(data),
        "INSTANTSTART_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "instantstart.cli.main", "serve", "--port", "1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and f"chmod 600 {token}" in proc.stderr
    assert "a-token-that-others-can-read" not in proc.stderr + proc.stdout


def test_sign_in_failures_lock_out_their_own_client_only() -> None:
    limiter = FailureLimiter(limit=20, window=60, max_clients=100)
    for _ in range(20):
        limiter.failed("198.51.100.7")
    assert limiter.blocked("198.51.100.7") and not limiter.blocked("192.0.2.1")
    for index in range(1000):
        limiter.failed(f"10.0.{index // 250}.{index % 250}")
    assert len(limiter) == 100  # bounded however many addresses fail


def test_wrong_tokens_over_http_do_not_lock_out_the_right_one_elsewhere(server: Running) -> None:
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as anon:
        for _ in range(20):
            assert anon.post("/sign-in", data={"token": "wrong"}).status_code == 401
        assert anon.post("/sign-in", data={"token": server.token}).status_code == 429  # this client waits
    # The limiter is keyed by client address: another address is not affected (unit-checked above);
    # a bearer-token client never goes through sign-in at all.
    with server.client() as client:
        assert client.get("/api/v1/operations").status_code == 200


async def test_describe_cache_is_bounded() -> None:
    cache = DescribeCache(ttl=60, max_entries=50)

    async def fetch() -> int:
        return 1

    for index in range(500):
        await cache.get(f"key-{index}", fetch)
    assert len(cache) == 50
    await asyncio.sleep(0)


def test_cors_preflight_is_answered_before_auth(tmp_path: Path) -> None:
    origin = "http://ui.example:8080"
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 's.db'}", allowed_origins=[origin]) as server:
        headers = {
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        }
        ok = httpx.options(server.url + "/api/v1/operations", headers=headers)
        foreign = httpx.options(server.url + "/api/v1/operations", headers={**headers, "Origin": "http://evil.example"})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == origin
    assert foreign.status_code == 401


def test_eks_endpoint_is_never_open_to_the_world_by_default() -> None:
    assert Settings().eks_public_access_cidrs == []
    assert endpoint_access([]) == {"endpointPublicAccess": False}
    assert endpoint_access(["203.0.113.7/32"]) == {
        "endpointPublicAccess": True,
        "publicAccessCidrs": ["203.0.113.7/32"],
    }
