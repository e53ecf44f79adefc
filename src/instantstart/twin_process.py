"""`serve --twin`: run the digital twin as a child process and point the control plane's AWS calls at it.

The twin is a separate program (`python -m hyperpod_twin`), never imported: the control plane talks to
it only over HTTP, exactly as it talks to AWS, and a crash of the control plane leaves the twin's state
in place (which the crash-and-resume tests rely on).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from instantstart.aws.iam import BOUNDARY_POLICY
from instantstart.errors import PreconditionFailed
from instantstart.services.account.policy import BOUNDARY_RESOURCE, POLICY_RESOURCE, resource_path

READY_MARKER = "Project bucket:"
EXPORTED = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION")


@dataclass
class TwinProcess:
    """A running twin child process and the environment that points boto3 at it."""

    process: subprocess.Popen[str]
    env: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint_url(self) -> str:
        """Where the twin's AWS endpoint listens."""
        return self.env["AWS_ENDPOINT_URL"]

    def stop(self) -> None:
        """Terminate the twin."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start_twin(port: int = 0, clock_scale: float | None = None, timeout: float = 60.0) -> TwinProcess:
    """Start `python -m hyperpod_twin` and wait until it says how to reach it. The twin account is set up as the
    management environment stack sets up a real one: the permissions boundary exists and the caller holds the
    control-plane policy, which the twin then enforces on the control plane's guarded calls."""
    args = [sys.executable, "-m", "hyperpod_twin", "--port", str(port)]
    args += ["--caller-policy", str(resource_path(POLICY_RESOURCE)),
             "--account-policy", f"{BOUNDARY_POLICY}={resource_path(BOUNDARY_RESOURCE)}"]
    if clock_scale is not None:
        args += ["--clock-scale", str(clock_scale)]
    try:
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=None, text=True, bufsize=1)
    except OSError as exc:
        raise PreconditionFailed(f"Cannot start the digital twin: {exc}") from exc
    twin = TwinProcess(process)
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    for line in process.stdout:
        text = line.strip()
        if text.startswith("export "):
            key, _, value = text[len("export ") :].partition("=")
            if key in EXPORTED:
                twin.env[key] = value
        if text.startswith(READY_MARKER) or time.monotonic() > deadline:
            break
    if "AWS_ENDPOINT_URL" not in twin.env:
        twin.stop()
        raise PreconditionFailed(
            "The digital twin did not start (is the package installed with the [twin] extra?).",
            hint="Run `make run`, which installs everything, or pip install -e '.[twin]'.",
        )
    # Keep draining its stdout so the child never blocks on a full pipe.
    threading.Thread(target=_drain, args=(process,), daemon=True).start()
    twin.info = _wait_healthy(twin.endpoint_url, deadline)
    return twin


def _drain(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for _line in process.stdout:
        pass


def _wait_healthy(url: str, deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url + "/_twin/health", timeout=2)
            if response.status_code == 200:
                info: dict[str, Any] = response.json()
                return info
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise PreconditionFailed(f"The digital twin at {url} did not become healthy.")


def apply_env(twin: TwinProcess) -> None:
    """Point this process's boto3 default chain at the twin."""
    os.environ.update(twin.env)
