"""The CLI face as a user runs it: a real `instantstart` process talking to the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.servers import REPO, Running


def run_cli(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    env = running.env()
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "instantstart.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_wait_polls_to_the_terminal_state_with_progress(server: Running, tmp_path: Path) -> None:
    done = run_cli(server, "probe", "run", "--journal-dir", str(tmp_path / "ok"), "--stage-seconds", "0.3", "--wait")
    assert done.returncode == 0, done.stderr
    assert "SUCCEEDED" in done.stdout
    assert "stage=alpha" in done.stderr or "stage=beta" in done.stderr  # progress lines while waiting
    flag = tmp_path / "refuse"
    flag.write_text("x")
    behaviour = json.dumps({"alpha": {"failIfFileExists": str(flag)}})
    failed = run_cli(
        server,
        "probe",
        "run",
        "--journal-dir",
        str(tmp_path / "bad"),
        "--target",
        "other",
        "--behaviour",
        behaviour,
        "--wait",
        "-o",
        "json",
    )
    assert failed.returncode == 1
    view = json.loads(failed.stdout)
    assert view["status"] == "FAILED" and view["error"]["code"] == "PRECONDITION_FAILED"


def test_json_output_and_errors(server: Running) -> None:
    listing = run_cli(server, "cluster", "list-all", "-o", "json")
    assert listing.returncode == 0
    assert json.loads(listing.stdout) == {"clusters": [], "activeCluster": None, "count": 0, "watched": 0,
                                          "watchIdleSeconds": 300.0}
    table = run_cli(server, "cluster", "list-all")
    assert "count" in table.stdout and "0" in table.stdout
    missing = run_cli(server, "cluster", "switch", "--cluster-tag", "ghost")
    assert missing.returncode == 1
    assert "NOT_FOUND" in missing.stderr and "hint" in missing.stderr
    bad = run_cli(server, "util", "wait", "--seconds", "0", "-o", "json")
    assert bad.returncode == 1
    assert json.loads(bad.stderr)["error"]["details"]["fields"][0]["field"] == "seconds"


def test_cli_without_a_server_says_so(tmp_path: Path) -> None:
    env = {"INSTANTSTART_DATA_DIR": str(tmp_path), "INSTANTSTART_SERVER_URL": "http://127.0.0.1:9", "PATH": "/usr/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "instantstart.cli.main", "cluster", "list-all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
