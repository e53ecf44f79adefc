"""Running the real server for tests: in a thread (fast) or as a separate process (crash tests)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from instantstart.api.app import create_app
from instantstart.server import uvicorn_options
from instantstart.settings import Settings
from tests.support.clock import SkipClock

REPO = Path(__file__).resolve().parents[2]
# Child processes import this checkout's sources first (in a git worktree the venv's editable install points at
# another checkout), then the repository root for tests.support.
CHILD_PYTHONPATH = os.pathsep.join([str(REPO / "src"), str(REPO)])

# Every httpx client builds an SSL context (the CA bundle parsed: ~50 ms of CPU) unless it is handed one, even for
# the plain-HTTP loopback servers of the tests; polling loops that made a client per request kept a core busy while
# a server started. Clients in tests/support take this one, built once per process.
SSL_CONTEXT = ssl.create_default_context()


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Running:
    """A running server: where it is and how to authenticate."""

    url: str
    token: str
    data_dir: Path
    database_url: str
    context: Any = None  # the application's AppContext when served in this process (thread_server)
    clock: SkipClock | None = None  # what its caches' intervals are measured by (thread_server): advance, never sleep

    def client(self, **kwargs: object) -> httpx.Client:
        """An authenticated client."""
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, verify=SSL_CONTEXT, **kwargs)  # type: ignore[arg-type]

    def env(self) -> dict[str, str]:
        """Environment for a CLI or stdio-proxy subprocess talking to this server."""
        return {
            **os.environ,
            "INSTANTSTART_DATA_DIR": str(self.data_dir),
            "INSTANTSTART_SERVER_URL": self.url,
            "INSTANTSTART_DATABASE_URL": self.database_url,
            "NO_COLOR": "1",
            "COLUMNS": "200",
            "INSTANTSTART_PLUGINS": '["tests.support.probe_ops"]',
        }


def wait_healthy(url: str, timeout: float = 60.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Block until /healthz answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1, verify=SSL_CONTEXT).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not become healthy")


@contextmanager
def thread_server(data_dir: Path, database_url: str, send_buffer: int | None = None,
                  **settings: object) -> Iterator[Running]:
    """The full app served by uvicorn in a background thread (`send_buffer`: the kernel's send buffer of each
    accepted connection, in bytes, like a congested link; default the system's)."""
    port = free_port()
    config = Settings(
        data_dir=data_dir,
        database_url=database_url,
        port=port,
        lease_seconds=3,
        worker_poll_seconds=0.1,
        plugins=["tests.support.probe_ops"],
        **settings,
    )  # type: ignore[arg-type]
    clock = SkipClock()
    app = create_app(config, clock=clock)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on",
                                           **uvicorn_options(config)))
    # IPPROTO_TCP, not socket()'s default protocol 0: asyncio turns Nagle's algorithm off only on sockets it knows
    # are TCP (accepted ones inherit the listener's protocol), and with Nagle on, a response written as headers
    # then body waits for the client's delayed ACK: 40 ms on every request (uvicorn.run binds its own, with TCP).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer is not None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)  # accepted sockets inherit it
    listener.bind(("127.0.0.1", port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    url = f"{'https' if config.tls_cert_file else 'http'}://127.0.0.1:{port}"
    wait_healthy(url)
    token = (data_dir / "api-token").read_text().strip()
    try:
        yield Running(url, token, data_dir, database_url, app.fastapi.state.context, clock)  # type: ignore[attr-defined]
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def process_server(
    data_dir: Path,
    database_url: str,
    port: int | None = None,
    log_path: Path | None = None,
    extra_env: dict[str, str] | None = None,
    healthy_timeout: float = 120.0,
    token: str | None = None,
) -> Iterator[tuple[Running, subprocess.Popen[bytes]]]:
    """`instantstart serve` as a child process (so a test can kill -9 it); `token`: the API token it was given
    in INSTANTSTART_API_TOKEN (else the one it wrote to its data directory)."""
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "INSTANTSTART_DATA_DIR": str(data_dir),
        "INSTANTSTART_DATABASE_URL": database_url,
        "INSTANTSTART_PORT": str(port),
        "INSTANTSTART_LEASE_SECONDS": "2",
        "INSTANTSTART_WORKER_POLL_SECONDS": "0.1",
        "INSTANTSTART_PLUGINS": '["tests.support.probe_ops"]',
        "PYTHONPATH": CHILD_PYTHONPATH,
        **(extra_env or {}),
    }
    log = open(log_path or (data_dir / f"server-{port}.log"), "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "instantstart.cli.main", "serve"],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=healthy_timeout, proc=proc)
        token = token or (data_dir / "api-token").read_text().strip()
        yield Running(url, token, data_dir, database_url), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


@dataclass
class ServedTwin:
    """`instantstart serve --twin` as a child process: the control plane and the twin it started."""

    running: Running
    process: subprocess.Popen[bytes]
    endpoint_url: str
    env: dict[str, str]
    info: dict[str, object]


@contextmanager
def serve_twin_process(data_dir: Path, clock_scale: float = 500.0, timeout: float = 120.0) -> Iterator[ServedTwin]:
    """`instantstart serve --twin` on ephemeral ports with its own data dir and SQLite database, as an agent's
    MCP client meets it: started as a subprocess, waited on /healthz, terminated (with its twin) on exit."""
    from hyperpod_twin.twin import ACCESS_KEY_ID, SECRET_ACCESS_KEY

    port, twin_port = free_port(), free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "INSTANTSTART_DATA_DIR": str(data_dir),
        "INSTANTSTART_DATABASE_URL": f"sqlite:///{data_dir / 'state.db'}",
        "INSTANTSTART_LEASE_SECONDS": "3",
        "INSTANTSTART_WORKER_POLL_SECONDS": "0.1",
        "INSTANTSTART_POLL_SECONDS": "0.2",
        "INSTANTSTART_STATUS_CACHE_SECONDS": "1.0",
        "PYTHONPATH": CHILD_PYTHONPATH,
    }
    env.pop("INSTANTSTART_PLUGINS", None)
    log = open(data_dir / "serve.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "instantstart.cli.main", "serve", "--twin", "--port", str(port),
         "--twin-port", str(twin_port), "--twin-clock-scale", str(clock_scale)],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    endpoint = f"http://127.0.0.1:{twin_port}"
    try:
        wait_healthy(url, timeout=timeout, proc=proc)
        info: dict[str, object] = httpx.get(endpoint + "/_twin/health", timeout=10, verify=SSL_CONTEXT).json()
        if info.get("clock_scale") != clock_scale:  # the server's own twin, started with the options it was given
            raise RuntimeError(f"the twin at {endpoint} is not the one serve --twin started: {info}")
        twin_env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
                    "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY, "AWS_REGION": str(info.get("region", "us-west-2"))}
        token = (data_dir / "api-token").read_text().strip()
        yield ServedTwin(Running(url, token, data_dir, env["INSTANTSTART_DATABASE_URL"]), proc, endpoint, twin_env,
                         info)
    finally:
        if proc.poll() is None:
            proc.terminate()  # the server's shutdown stops its twin
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: a twin left behind by a server that died
        log.close()
