"""`python -m hyperpod_twin` starts the twin on a port and prints how to point boto3 at it."""

from __future__ import annotations

import os
import subprocess
import sys

import boto3


def test_module_entry_point_serves_and_explains() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperpod_twin", "--port", "0", "--clock-scale", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not any(line.startswith("Project bucket:") for line in lines):
            line = proc.stdout.readline()
            assert line, "twin exited early:\n" + "".join(lines)
            lines.append(line)
        exports = dict(
            line.strip().removeprefix("export ").split("=", 1) for line in lines if line.strip().startswith("export ")
        )
        assert exports["AWS_DEFAULT_REGION"] == "us-west-2"
        assert exports["AWS_ACCESS_KEY_ID"] == "AKIATWINTWINTWIN0001"
        assert exports["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
        sts = boto3.client(
            "sts",
            endpoint_url=exports["AWS_ENDPOINT_URL"],
            region_name=exports["AWS_DEFAULT_REGION"],
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
        )
        assert sts.get_caller_identity()["Account"] == "111122223333"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0
