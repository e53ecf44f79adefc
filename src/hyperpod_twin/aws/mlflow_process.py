"""The real `mlflow server` behind the twin's SageMaker MLflow tracking servers: one process per twin, started
lazily on the first CreateMlflowTrackingServer, shared by every tracking server, stopped with the twin."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

log = logging.getLogger(__name__)
START_LIMIT = 300.0  # seconds a first start may take on a loaded machine (database migrations included)


def mlflow_executable() -> str | None:
    """The `mlflow` command of the twin's own environment (the `twin` extra pins it), else one on PATH."""
    beside = Path(sys.executable).parent / "mlflow"
    return str(beside) if beside.exists() else shutil.which("mlflow")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowProcess:
    """One `mlflow server` on a loopback port with a SQLite store in a temporary directory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._error: str | None = None
        self._dir: Path | None = None
        self.url = ""

    def ensure_started(self) -> None:
        """Start the process unless it runs already (returns at once; `wait_ready` waits for health)."""
        with self._lock:
            if self._proc is not None or self._error is not None:
                return
            exe = mlflow_executable()
            if exe is None:
                self._error = ("the mlflow package is not installed in the twin's environment "
                               "(pip install -e '.[twin-mlflow]')")
                return
            self._dir = Path(tempfile.mkdtemp(prefix="twin-mlflow-"))
            port = _free_port()
            self.url = f"http://127.0.0.1:{port}"
            log_file = (self._dir / "server.log").open("wb")
            self._proc = subprocess.Popen(
                [exe, "server", "--backend-store-uri", f"sqlite:///{self._dir / 'mlflow.db'}",
                 "--default-artifact-root", str(self._dir / "artifacts"), "--host", "127.0.0.1",
                 "--port", str(port), "--workers", "1"],
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                # Tracking only: no GenAI job runner (it adds eight worker processes on a 2-core machine).
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
            log.info("twin mlflow server starting at %s (pid %s)", self.url, self._proc.pid)
        threading.Thread(target=self._watch_health, name="twin-mlflow-health", daemon=True).start()

    def _watch_health(self) -> None:
        deadline = time.monotonic() + START_LIMIT
        # One client for the whole wait: each new httpx client parses the CA bundle (~50 ms of CPU), taken from the
        # server that is starting on the same cores.
        with httpx.Client(timeout=2) as client:
            while not self._stopping.is_set() and time.monotonic() < deadline:
                proc = self._proc
                if proc is None or proc.poll() is not None:
                    self._error = f"mlflow server exited with {proc.returncode if proc else '?'} (log: {self._dir})"
                    return
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        self._ready.set()
                        return
                except httpx.HTTPError:
                    pass
                self._stopping.wait(0.3)
        self._error = self._error or f"mlflow server not healthy within {START_LIMIT:.0f} s (log: {self._dir})"

    @property
    def ready(self) -> bool:
        """Healthy and answering."""
        return self._ready.is_set()

    @property
    def error(self) -> str | None:
        """Why the process cannot serve, if it cannot."""
        return self._error

    def wait_ready(self, timeout: float) -> bool:
        """Wait for health; True once healthy."""
        return self._ready.wait(timeout)

    def stop(self) -> None:
        """Stop the process group (the server and its workers)."""
        self._stopping.set()
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            proc.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
