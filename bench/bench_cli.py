"""Benchmark first touch: the CLI's `--help`, a client command, `instantstart mcp`'s first tools/list, serve's idle RSS.

Run: .venv/bin/python bench/bench_cli.py [RUNS]   (default 5 runs per figure; loopback only)

Starts a twin and `instantstart serve` as child processes, then times, RUNS times each in a fresh interpreter:
- `instantstart --help`;
- `instantstart cluster list-all -o json` against the served control plane;
- `instantstart mcp`: from start to the answer of `tools/list` sent right after the initialize handshake;
and reads the served control plane's RSS once idle (healthy, then 2 s without a request). Each figure is printed
beside its target with the ratio, and with the CPU seconds the command took (wall time moves with the load of a
shared machine, CPU time much less). Asserts nothing about timing.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from instantstart.twin_process import start_twin

REPO = Path(__file__).resolve().parents[1]
# The console script people and agents start (its imports come from PYTHONPATH=src below), else the module.
SCRIPT = Path(sys.executable).parent / "instantstart"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "instantstart.cli.main"]
TARGETS = {"--help": 0.3, "list-all": 0.3, "mcp tools/list": 0.5}  # seconds
RSS_TARGET = 150.0  # MB


def children_cpu() -> float:
    """CPU seconds used so far by this process's waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `command`, which must succeed."""
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run(command, env=env, cwd=REPO, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - started, children_cpu() - cpu


def mcp_tools_list(env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds from start to the tools/list answer, CPU seconds of the process, number of tools)."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    cpu, started = children_cpu(), time.perf_counter()
    proc = subprocess.Popen([*CLI, "mcp"], env=env, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
    proc.stdin.flush()
    tools = -1
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == 2:
            tools = len(message["result"]["tools"])
            break
    wall = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    return wall, children_cpu() - cpu, tools


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` in MB (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def report(name: str, runs: list[tuple[float, float]]) -> None:
    """One figure: median wall and CPU seconds beside the target."""
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    target = TARGETS[name]
    print(f"{name:15} median {wall:.3f} s (min {min(r[0] for r in runs):.3f}), CPU {cpu:.3f} s; "
          f"target < {target} s: {wall / target:.2f}x of it")


def main(runs: int) -> None:
    twin = start_twin()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, **twin.env, "INSTANTSTART_DATA_DIR": str(tmp), "INSTANTSTART_PORT": str(port),
           "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url, "INSTANTSTART_LOG_LEVEL": "WARNING",
           "INSTANTSTART_SERVER_URL": f"http://127.0.0.1:{port}", "PYTHONPATH": str(REPO / "src")}
    env.pop("INSTANTSTART_PLUGINS", None)
    cp = subprocess.Popen([*CLI, "serve"], env=env, cwd=REPO, stdout=open(tmp / "cp.log", "wb"),  # noqa: SIM115
                          stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        time.sleep(2.0)
        idle_rss = rss_mb(cp.pid)
        helps = [timed([*CLI, "--help"], env) for _ in range(runs)]
        lists = [timed([*CLI, "cluster", "list-all", "-o", "json"], env) for _ in range(runs)]
        mcps = [mcp_tools_list(env) for _ in range(runs)]
        print(f"first touch, {runs} runs each (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
        report("--help", helps)
        report("list-all", lists)
        report("mcp tools/list", [(w, c) for w, c, _ in mcps])
        print(f"{'':15} ({mcps[0][2]} tools listed)")
        print(f"serve idle RSS  {idle_rss:.0f} MB; target < {RSS_TARGET:.0f} MB: {idle_rss / RSS_TARGET:.2f}x of it")
    finally:
        cp.send_signal(2)
        cp.wait(timeout=30)
        twin.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
