"""Benchmark P3/P5: cluster_get_status on a large twin cluster, beside a kubectl read; the control plane's RSS.

Run: .venv/bin/python bench/bench_status.py [NODES]   (default 2000; loopback only; bounded in time)

Starts a twin and `instantstart serve` (SQLite) as child processes, creates the EKS stage of one cluster,
adds NODES HyperPod-labelled Nodes through its Kubernetes API, then measures in one run:
- summary `cluster_get_status` latency with 1 client (sequential) and 100 clients each polling once a
  second, and reads/s at saturation (100 clients, no pause), with the response size;
- `kubectl get nodes,pods -A -o json` of the same cluster as a subprocess;
- the control plane's RSS idle (before any cluster) and its peak under the load.
Prints figures and ratios; asserts nothing about timing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s

from instantstart.aws.clients import AwsClients
from instantstart.kube.client import KubeClients
from instantstart.settings import Settings
from instantstart.twin_process import start_twin

REPO = Path(__file__).resolve().parents[1]
TAG = "bench"
DEADLINE = 900.0  # the whole run is abandoned after this long


def rss_mb(pid: int) -> float:
    """Resident set size of a process, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank), ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1000


def wait_op(client: httpx.Client, ref: dict[str, Any], limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while True:
        view = client.get(f"/api/v1/operations/{ref['operationId']}").json()
        if view["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            assert view["status"] == "SUCCEEDED", view
            return
        assert time.monotonic() < deadline, view
        time.sleep(0.3)


def node_body(i: int) -> dict[str, Any]:
    big = i % 4 == 0
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"hyperpod-i-{i:017x}", "labels": {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge" if big else "ml.g6.12xlarge",
        "sagemaker.amazonaws.com/instance-group-name": "p5" if big else "g6",
        "sagemaker.amazonaws.com/cluster-name": f"hp-cluster-{TAG}",
        "sagemaker.amazonaws.com/node-health-status": "Unschedulable" if i % 97 == 0 else "Schedulable",
        "topology.kubernetes.io/zone": "us-west-2c"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "allocatable": {"nvidia.com/gpu": "8" if big else "4", "cpu": "96", "pods": "110"}}}


async def _reader(host: str, port: int, request: bytes) -> Any:
    reader, writer = await asyncio.open_connection(host, port)

    async def get() -> int:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        return status

    return get, writer


async def poll(
    url: str, headers: dict[str, str], clients: int, seconds: float, pause: float
) -> tuple[list[float], int]:
    """`clients` concurrent keep-alive connections for `seconds`; each waits `pause` between reads.
    A minimal raw HTTP/1.1 client, so the load generator costs little CPU beside the server measured."""
    host, port = url.removeprefix("http://").split(":")
    auth = headers["Authorization"]
    request = (f"GET /api/v1/clusters/status HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: {auth}\r\n"
               "Accept: application/json\r\n\r\n").encode()
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def one(offset: float) -> None:
        get, writer = await _reader(host, int(port), request)
        await asyncio.sleep(offset)
        try:
            while time.monotonic() < stop:
                started = time.perf_counter()
                assert await get() == 200
                latencies.append(time.perf_counter() - started)
                if pause:
                    await asyncio.sleep(pause)
        finally:
            writer.close()

    await asyncio.gather(*(one(pause * i / clients) for i in range(clients)))
    return latencies, len(latencies)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(nodes: int) -> None:
    begun = time.monotonic()
    twin = start_twin(clock_scale=500)
    os.environ.update(twin.env)  # this process signs EKS tokens with the twin account too
    tmp = Path(tempfile.mkdtemp(prefix="bench-status-"))
    env = {**os.environ, **twin.env, "INSTANTSTART_DATA_DIR": str(tmp), "INSTANTSTART_PORT": "0",
           "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url, "INSTANTSTART_POLL_SECONDS": "0.5",
           "INSTANTSTART_LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO / "src")}
    port = 31000 + os.getpid() % 20000
    env["INSTANTSTART_PORT"] = str(port)
    profile = ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]] if os.environ.get("BENCH_PROFILE") else []
    cp = subprocess.Popen([sys.executable, *profile, "-m", "instantstart.cli.main", "serve"], env=env, cwd=REPO,
                          stdout=open(tmp / "cp.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        time.sleep(2.0)
        idle_rss = rss_mb(cp.pid)
        headers = {"Authorization": f"Bearer {(tmp / 'api-token').read_text().strip()}"}
        client = httpx.Client(base_url=url, headers=headers, timeout=60)
        wait_op(client, client.post("/api/v1/clusters/eks", json={"clusterTag": TAG}).json())
        wait_op(client, client.post(f"/api/v1/clusters/{TAG}/switch").json())
        kube = KubeClients(AwsClients(Settings(data_dir=tmp / "kube", aws_endpoint_url=twin.endpoint_url)))
        api = kube.api_client(f"eks-cluster-{TAG}", twin.env["AWS_REGION"])
        core = k8s.CoreV1Api(api)
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: core.create_node(node_body(i), _preload_content=False), range(nodes)))
        made = time.monotonic() - started
        while client.get("/api/v1/clusters/status").json().get("nodeCount") != nodes:
            assert time.monotonic() - begun < DEADLINE
            time.sleep(0.5)
        body = client.get("/api/v1/clusters/status").content
        # 1 client, sequential.
        single: list[float] = []
        for _ in range(300):
            t = time.perf_counter()
            client.get("/api/v1/clusters/status")
            single.append(time.perf_counter() - t)
        peak = rss_mb(cp.pid)
        # 100 clients polling once a second; then saturation.
        polled, _ = asyncio.run(poll(url, headers, 100, 10.0, 1.0))
        peak = max(peak, rss_mb(cp.pid))
        cpu_before = cpu_seconds(cp.pid)
        saturated, count = asyncio.run(poll(url, headers, 100, 5.0, 0.0))
        cpu_per_read = (cpu_seconds(cp.pid) - cpu_before) / max(count, 1) * 1000
        peak = max(peak, rss_mb(cp.pid))
        # kubectl beside it.
        endpoint, token, ca = kube.connection(f"eks-cluster-{TAG}", twin.env["AWS_REGION"])
        kubectl: list[float] = []
        for _ in range(3):
            t = time.perf_counter()
            out = subprocess.run(["kubectl", f"--server={endpoint}", f"--token={token}",
                                  f"--certificate-authority={ca}", "get", "nodes,pods", "-A", "-o", "json"],
                                 capture_output=True, check=True, timeout=300)
            kubectl.append(time.perf_counter() - t)
        kubectl_ms = statistics.median(kubectl) * 1000
        print(f"nodes: {nodes} (created through the Kubernetes API in {made:.1f}s)")
        print(f"P3 cluster_get_status summary: {len(body)} bytes (kubectl JSON: {len(out.stdout)} bytes)")
        print(f"P3 1 client:    p50 {pct(single, 50):.1f} ms  p99 {pct(single, 99):.1f} ms")
        print(f"P3 100 clients polling 1/s: p50 {pct(polled, 50):.1f} ms  p99 {pct(polled, 99):.1f} ms "
              f"({len(polled) / 10:.0f} reads/s)")
        print(f"P3 saturation (100 clients, no pause): {count / 5:.0f} reads/s  p99 {pct(saturated, 99):.1f} ms; "
              f"server CPU {cpu_per_read:.2f} ms per read (= {1000 / cpu_per_read:.0f} reads/s per core)")
        print(f"   machine load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"P3 kubectl get nodes,pods -A -o json: median {kubectl_ms:.0f} ms")
        print(f"P3 ratio kubectl / status p50 (1 client): {kubectl_ms / pct(single, 50):.0f}x")
        print(f"P5 RSS: idle {idle_rss:.0f} MB; peak with {nodes} nodes watched and 100 clients {peak:.0f} MB")
    finally:
        cp.send_signal(2)  # SIGINT: a graceful stop (a profile, when asked for, is written)
        cp.wait(timeout=30)
        twin.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
