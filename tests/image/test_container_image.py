"""The container image: built (cached), run with `serve --twin`, /healthz 200, one MCP tool call, not root.

Needs buildah, podman, mmdebstrap and runc (`make test` installs them); without them it is skipped unless
INSTANTSTART_REQUIRE_IMAGE=1 (set by the Makefile), where their absence fails the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import image  # noqa: E402  (scripts/image.py: the same build and podman options as `make image`)

TOOLS = ("buildah", "podman", "mmdebstrap", "runc")
pytestmark = pytest.mark.timeout(1500)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def built() -> str:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        if os.environ.get("INSTANTSTART_REQUIRE_IMAGE") == "1":
            pytest.fail(f"{', '.join(missing)} missing: `make image-tools` installs them")
        pytest.skip(f"{', '.join(missing)} not installed (make test installs them)")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "image.py"), "build"], capture_output=True, text=True, timeout=1400
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    print(f"image build took {time.monotonic() - started:.1f}s")
    return image.IMAGE


@pytest.fixture(scope="module")
def container(built: str) -> Iterator[tuple[str, int]]:
    name = f"instantstart-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    subprocess.run(
        [*image.PODMAN, "run", "-d", "--name", name, "--network", "host",
         "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "-e", f"INSTANTSTART_PORT={port}",
         built, "serve", "--twin"],
        check=True, capture_output=True, text=True,
    )
    try:
        yield name, port
    finally:
        subprocess.run([*image.PODMAN, "rm", "-f", "-v", name], check=False, capture_output=True)


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*image.PODMAN, *args], capture_output=True, text=True, check=False, timeout=120)


def wait_healthy(name: str, port: int) -> httpx.Response:
    deadline = time.monotonic() + 240
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=3)
            if response.status_code == 200:
                return response
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = str(exc)
        state = podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
        assert state == "running", podman("logs", name).stdout[-3000:] + podman("logs", name).stderr[-3000:]
        time.sleep(1)
    raise AssertionError(f"/healthz never answered 200: {last}")


async def call_tool(url: str, token: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert "cluster_get_availability_zones" in tools
        result = await session.call_tool("cluster_get_availability_zones", {})
        assert not result.is_error, result.content
        return dict(result.structured_content or {})


def test_image_serves_the_twin_as_a_non_root_user(container: tuple[str, int]) -> None:
    name, port = container
    health = wait_healthy(name, port)
    assert health.json()["status"] == "ok"
    url = f"http://127.0.0.1:{port}"
    # Bound on every interface inside the container, and token auth is required there.
    assert httpx.get(url + "/api/v1/clusters", timeout=10).status_code == 401
    token = podman("exec", name, "cat", "/data/api-token").stdout.strip()
    assert len(token) >= 32
    zones = asyncio.run(call_tool(url, token))
    assert "us-west-2a" in json.dumps(zones)
    uid = podman("exec", name, "id", "-u").stdout.strip()
    assert uid == "10001"
    assert podman("top", name, "user").stdout.split()[1:] and "root" not in podman("top", name, "user").stdout
    assert podman("exec", name, "helm", "version", "--short").stdout.startswith("v3.")
    assert podman("healthcheck", "run", name).returncode == 0
