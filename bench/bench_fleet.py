"""Benchmark (issue 33, fleet): one control plane watching CLUSTERS twin clusters of NODES nodes each.

Run: .venv/bin/python bench/bench_fleet.py [CLUSTERS] [NODES] [--park SECONDS]
     (default 20 x 500; loopback only; bounded in time)

Starts a twin and `instantstart serve` (SQLite) as child processes and builds the fleet: the account's VPC, internet
gateway, NAT gateway and Elastic IP quotas raised to CLUSTERS + 5 (defaults 5), the EKS stage of every
cluster through the control plane (cluster_create_eks, all submitted at once), then NODES HyperPod-labelled Nodes
per cluster through the twin's bulk registration (`POST /_twin/kube/<cluster>/nodes/create`, one request per
cluster). Then it reads every cluster once (cluster_get_status with its clusterTag: its watches start) and prints:
- the fleet build time (first create to every cluster watched with all its nodes; target <= 5 min);
- cluster_get_status p50/p99 with 100 pollers spread over the clusters, each polling once a second (< 50 ms);
- cluster_list_all (every cluster with its health) p50/p99, sequential (< 100 ms);
- the control plane's RSS: idle, with the fleet built but unwatched, with every cluster watched (< 600 MB), and
  the memory per watched node (the difference over the nodes watched);
- with `--park SECONDS` (the server's watch_idle_seconds): after that long unread, how many clusters list_all
  shows parked and the RSS then.
Prints the figures, their targets and ratios; asserts nothing about timing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's helpers
from bench_status import _reader, pct, rss_mb, wait_op

from instantstart.twin_process import start_twin

REPO = Path(__file__).resolve().parents[1]
DEADLINE = 1800.0  # the whole run is abandoned after this long


def node_body(tag: str, i: int) -> dict[str, Any]:
    """A HyperPod-labelled node of cluster `tag`: every fourth a p5 (8 GPUs), the rest g6 (4 GPUs)."""
    big = i % 4 == 0
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"hyperpod-i-{tag}-{i:06d}", "labels": {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge" if big else "ml.g6.12xlarge",
        "sagemaker.amazonaws.com/instance-group-name": "p5" if big else "g6",
        "sagemaker.amazonaws.com/cluster-name": f"hp-cluster-{tag}",
        "sagemaker.amazonaws.com/node-health-status": "Unschedulable" if i % 97 == 0 else "Schedulable",
        "topology.kubernetes.io/zone": "us-west-2c"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "allocatable": {"nvidia.com/gpu": "8" if big else "4", "cpu": "96", "pods": "110"}}}


async def poll_spread(url: str, auth: str, tags: list[str], clients: int, seconds: float) -> list[float]:
    """`clients` keep-alive connections, client i polling cluster i mod len(tags) once a second for `seconds`."""
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def one(i: int) -> None:
        request = (f"GET /api/v1/clusters/status?clusterTag={tags[i % len(tags)]} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                   f"Authorization: {auth}\r\nAccept: application/json\r\n\r\n").encode()
        get, writer = await _reader(host, int(port), request)
        await asyncio.sleep(i / clients)
        try:
            while time.monotonic() < stop:
                started = time.perf_counter()
                assert await get() == 200
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(1.0)
        finally:
            writer.close()

    await asyncio.gather(*(one(i) for i in range(clients)))
    return latencies


def build(client: httpx.Client, twin_url: str, tags: list[str], nodes: int) -> tuple[float, float]:
    """The fleet: every EKS stage (submitted together), then each cluster's nodes in one request. Returns (seconds
    to every EKS stage done, seconds to every node registered) from the start."""
    # An account sized for a fleet: the VPC-side quotas raised as a platform team would (defaults: 5 each).
    for service, code in (("vpc", "L-F678F1CE"), ("vpc", "L-A4707A72"), ("vpc", "L-FE5A380F"), ("ec2", "L-0263D0A3")):
        raised = httpx.post(f"{twin_url}/_twin/quotas",
                            json={"service_code": service, "quota_code": code, "value": len(tags) + 5}, timeout=30)
        assert raised.status_code == 200, raised.text
    started = time.monotonic()
    refs = [client.post("/api/v1/clusters/eks", json={"clusterTag": tag}).json() for tag in tags]
    for ref in refs:
        wait_op(client, ref, limit=DEADLINE)
    eks_done = time.monotonic() - started

    def register(tag: str) -> None:
        body = {"nodes": [node_body(tag, i) for i in range(nodes)]}
        made = httpx.post(f"{twin_url}/_twin/kube/eks-cluster-{tag}/nodes/create", json=body, timeout=300)
        assert made.status_code == 200 and made.json()["created"] == nodes, made.text

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(register, tags))
    return eks_done, time.monotonic() - started


def watch_all(client: httpx.Client, tags: list[str], nodes: int, begun: float) -> None:
    """Read every cluster until its status counts all its nodes (its watches started and listed)."""
    for tag in tags:
        while client.get("/api/v1/clusters/status", params={"clusterTag": tag}).json().get("nodeCount") != nodes:
            assert time.monotonic() - begun < DEADLINE, f"{tag} never showed its {nodes} nodes"
            time.sleep(0.2)


def main(count: int, nodes: int, park: float | None) -> None:
    begun = time.monotonic()
    twin = start_twin(clock_scale=500)
    os.environ.update(twin.env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    port = 32000 + os.getpid() % 20000
    env = {**os.environ, **twin.env, "INSTANTSTART_DATA_DIR": str(tmp), "INSTANTSTART_PORT": str(port),
           "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url, "INSTANTSTART_POLL_SECONDS": "0.5",
           "INSTANTSTART_MAX_CONCURRENT_OPERATIONS": str(max(count, 8)), "INSTANTSTART_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(REPO / "src")}
    if park is not None:
        env["INSTANTSTART_WATCH_IDLE_SECONDS"] = str(park)
    cp = subprocess.Popen([sys.executable, "-m", "instantstart.cli.main", "serve"], env=env, cwd=REPO,
                          stdout=open(tmp / "cp.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    tags = [f"fleet{i:02d}" for i in range(count)]
    try:
        healthy_by = time.monotonic() + 180  # a loaded machine starts the server slowly
        while True:
            assert cp.poll() is None and time.monotonic() < healthy_by, (tmp / "cp.log").read_text()[-2000:]
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(2.0)
        idle_rss = rss_mb(cp.pid)
        auth = f"Bearer {(tmp / 'api-token').read_text().strip()}"
        client = httpx.Client(base_url=url, headers={"Authorization": auth}, timeout=120)
        started = time.monotonic()
        eks_s, nodes_s = build(client, twin.endpoint_url, tags, nodes)
        unwatched_rss = rss_mb(cp.pid)
        watch_all(client, tags, nodes, begun)
        build_s = time.monotonic() - started
        watched_rss = rss_mb(cp.pid)
        listed: list[float] = []
        for _ in range(200):
            t = time.perf_counter()
            body = client.get("/api/v1/clusters").json()
            listed.append(time.perf_counter() - t)
        live = sum(1 for c in body["clusters"] if c["health"]["watch"] == "live")
        polled = asyncio.run(poll_spread(url, auth, tags, 100, 10.0))
        peak = max(watched_rss, rss_mb(cp.pid))
        total = count * nodes
        per_node_kb = (watched_rss - unwatched_rss) * 1024 / total
        print(f"fleet: {count} clusters x {nodes} nodes = {total} nodes "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"fleet build: {build_s:.1f} s (target <= 300 s: {build_s / 300:.2f}x); every EKS stage after "
              f"{eks_s:.1f} s, every node registered after {nodes_s:.1f} s, every cluster watched after "
              f"{build_s:.1f} s")
        print(f"cluster_get_status, 100 pollers over {count} clusters at 1/s: p50 {pct(polled, 50):.1f} ms "
              f"p99 {pct(polled, 99):.1f} ms (target < 50 ms: {pct(polled, 99) / 50:.2f}x; {len(polled)} reads)")
        print(f"cluster_list_all ({count} clusters with health, {live} live): p50 {pct(listed, 50):.1f} ms "
              f"p99 {pct(listed, 99):.1f} ms (target < 100 ms: {pct(listed, 99) / 100:.2f}x)")
        print(f"RSS: idle {idle_rss:.0f} MB; fleet built, unwatched {unwatched_rss:.0f} MB; every cluster watched "
              f"{watched_rss:.0f} MB; peak under the pollers {peak:.0f} MB (target < 600 MB: {peak / 600:.2f}x)")
        print(f"memory per watched node: {per_node_kb:.1f} KB ({watched_rss - unwatched_rss:.0f} MB for {total} nodes)")
        if park is not None:
            time.sleep(park + 1.0)  # the bench waits out the real idle time it configured (a test advances a clock)
            after = client.get("/api/v1/clusters").json()
            parked = sum(1 for c in after["clusters"] if c["health"]["watch"] == "parked")
            print(f"parking: after {park:.0f} s unread {parked} of {count} clusters parked; "
                  f"RSS {rss_mb(cp.pid):.0f} MB")
            t = time.perf_counter()
            resumed = client.get("/api/v1/clusters/status", params={"clusterTag": tags[0]}).json()
            print(f"resume: the first read of a parked cluster took {(time.perf_counter() - t) * 1000:.0f} ms "
                  f"({resumed.get('nodeCount')} nodes listed again)")
    finally:
        cp.send_signal(2)
        cp.wait(timeout=30)
        twin.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A twin fleet on one control plane.")
    parser.add_argument("clusters", type=int, nargs="?", default=20)
    parser.add_argument("nodes", type=int, nargs="?", default=500)
    parser.add_argument("--park", type=float, default=None, help="the server's watch_idle_seconds; report parking")
    parsed = parser.parse_args()
    main(parsed.clusters, parsed.nodes, parsed.park)
