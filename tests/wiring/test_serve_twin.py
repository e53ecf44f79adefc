"""`instantstart serve --twin`: the twin runs as a child process and goes away with the server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.servers import CHILD_PYTHONPATH, REPO, free_port, wait_healthy


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_serve_twin_starts_and_stops_the_twin(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "INSTANTSTART_DATA_DIR": str(tmp_path), "PYTHONPATH": CHILD_PYTHONPATH}
    proc = subprocess.Popen(
        [sys.executable, "-m", "instantstart.cli.main", "serve", "--twin", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=60, proc=proc)
        children = _children(proc.pid)
        assert len(children) == 1
        cmdline = Path(f"/proc/{children[0]}/cmdline").read_bytes().split(b"\0")
        assert b"hyperpod_twin" in cmdline
        token = (tmp_path / "api-token").read_text().strip()
        listing = httpx.get(f"http://127.0.0.1:{port}/api/v1/clusters", headers={"Authorization": f"Bearer {token}"})
        assert listing.status_code == 200
        # The control plane's hub is the twin's stand-in: an unknown model fails at once, naming what it has.
        typo = httpx.post(f"http://127.0.0.1:{port}/api/v1/models/download", json={"modelId": "twin-org/tiny-lama"},
                          headers={"Authorization": f"Bearer {token}"})
        assert typo.status_code == 422 and "twin-org/tiny-llama" in typo.json()["error"]["message"], typo.text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{children[0]}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{children[0]}").exists() or b"Z" in Path(f"/proc/{children[0]}/stat").read_bytes()
