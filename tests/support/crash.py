"""Kill -9 helpers: the control plane as a child process pointed at the twin, killed when a condition holds
and started again on the same database and data directory."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.servers import SSL_CONTEXT, Running, process_server
from tests.support.twin import control_plane_env


def running_stage(client: httpx.Client, operation_id: str) -> str | None:
    """The name of the operation's RUNNING stage, if one is."""
    view: dict[str, Any] = client.get(f"/api/v1/operations/{operation_id}").json()
    return next((s["name"] for s in view["stages"] if s["status"] == "RUNNING"), None)


def twin_writes(twin: TwinProcess) -> dict[str, int]:
    """The twin's counts of mutating calls since the last reset."""
    response = httpx.get(twin.endpoint_url + "/_twin/writes", timeout=10, verify=SSL_CONTEXT)
    writes: dict[str, int] = response.json()["writes"]
    return writes


class ControlPlane:
    """`instantstart serve` as a child process on one database and data directory: start, kill -9, start again."""

    def __init__(self, twin: TwinProcess, data: Path, database_url: str) -> None:
        self.env = control_plane_env(twin)
        self.data, self.database_url = data, database_url
        self._cm: AbstractContextManager[tuple[Running, Any]] | None = None
        self.running: Running | None = None
        self.proc: Any = None

    def start(self) -> Running:
        """Start a process (the previous one must be gone); a loaded machine gets two minutes to bring it up."""
        self.running, self.proc = None, None
        self._cm = process_server(self.data, self.database_url, extra_env=self.env, healthy_timeout=120)
        try:
            self.running, self.proc = self._cm.__enter__()
        except BaseException:
            self._cm = None
            raise
        return self.running

    def ensure_running(self) -> Running:
        """The running process, started again when an earlier test left none."""
        if self.running is None or self.proc is None or self.proc.poll() is not None:
            self.stop()
            return self.start()
        return self.running

    def kill_9(self) -> None:
        """SIGKILL the process: no shutdown, leases left to expire."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.stop()

    def stop(self) -> None:
        """Stop the process (terminate when still alive)."""
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None

    def kill_when(self, condition: Callable[[], str | None], timeout: float = 180) -> str:
        """Kill -9 as soon as `condition()` returns a description of the moment (checked every few ms);
        that description."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            moment = condition()
            if moment:
                self.kill_9()
                return moment
            time.sleep(0.005)
        raise AssertionError("the moment to kill never came")


def on_fresh_twin(twin: TwinProcess, prefix: str) -> ControlPlane:
    """A control plane (not started yet) on an emptied twin account, with its own temporary data directory and
    SQLite database (the module-scoped `plane` fixtures of the kill -9 tests)."""
    httpx.post(twin.endpoint_url + "/_twin/reset", timeout=60).raise_for_status()
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    return ControlPlane(twin, tmp / "data", f"sqlite:///{tmp / 'state.db'}")
