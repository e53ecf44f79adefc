"""Benchmark P2: AWS describe calls per resource per interval with 50 concurrent status pollers.

Run: .venv/bin/python bench/bench_describe.py [SECONDS]   (default 30; loopback only)

Runs the twin as a child process and the control plane in this process (so its outgoing HTTP calls can be
counted at urllib3, the transport boto3 and the Kubernetes client share), creates one cluster (EKS +
HyperPod, one node), then lets 50 clients poll cluster_get_status as fast as they can for SECONDS while
no operation runs, and again while one runs (an instance-group scale). Prints the calls per resource
beside the intervals that bound them. Asserts nothing about timing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import urllib3
import uvicorn

from instantstart.api.app import create_app
from instantstart.settings import Settings
from instantstart.twin_process import start_twin

TAG = "p2"
POLLERS = 50
CACHE_SECONDS = 5.0


class Calls:
    """Outgoing requests of this process by AWS operation (X-Amz-Target) or method and path."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        original = urllib3.connectionpool.HTTPConnectionPool.urlopen
        calls = self

        def urlopen(pool: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            target = (kwargs.get("headers") or {}).get("X-Amz-Target")
            key = target.decode() if isinstance(target, bytes) else str(target or f"{method} {url.split('?')[0]}")
            with calls.lock:
                calls.counts[key] += 1
            return original(pool, method, url, *args, **kwargs)

        urllib3.connectionpool.HTTPConnectionPool.urlopen = urlopen  # type: ignore[method-assign]

    def take(self) -> Counter[str]:
        """The counts so far, then zero."""
        with self.lock:
            out, self.counts = self.counts, Counter()
            return out


def wait_op(client: httpx.Client, ref: dict[str, Any]) -> dict[str, Any]:
    while True:
        view: dict[str, Any] = client.get(f"/api/v1/operations/{ref['operationId']}").json()
        if view["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return view
        time.sleep(0.2)


async def pollers(url: str, token: str, seconds: float) -> int:
    """POLLERS clients reading the status back to back for `seconds`; how many reads they made."""
    done = 0
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        stop = time.monotonic() + seconds

        async def one() -> None:
            nonlocal done
            while time.monotonic() < stop:
                assert (await http.get("/api/v1/clusters/status")).status_code == 200
                done += 1

        await asyncio.gather(*(one() for _ in range(POLLERS)))
    return done


def report(label: str, counts: Counter[str], reads: int, seconds: float, interval: float) -> None:
    describe = counts["SageMaker.DescribeCluster"]
    windows = seconds / interval
    print(f"P2 {label}: {reads} status reads by {POLLERS} pollers in {seconds:.0f} s; SageMaker DescribeCluster "
          f"{describe} calls = {describe / windows:.2f} per {interval:g} s interval (bound: 1 per interval, "
          f"+1 at the edge); Kubernetes requests {sum(n for k, n in counts.items() if k.startswith('GET /api'))}")


def main(seconds: float) -> None:
    twin = start_twin(clock_scale=500)
    os.environ.update(twin.env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-describe-"))
    port = 33000 + os.getpid() % 20000
    settings = Settings(data_dir=tmp, database_url=f"sqlite:///{tmp / 'state.db'}", port=port,
                        aws_endpoint_url=twin.endpoint_url, poll_seconds=0.5, status_cache_seconds=CACHE_SECONDS,
                        helm_repository_url=twin.info.get("chart_repo_url"), log_level="WARNING")
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        while not server.started:
            time.sleep(0.1)
        token = (tmp / "api-token").read_text().strip()
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert wait_op(client, client.post("/api/v1/clusters/eks", json={"clusterTag": TAG}).json())["status"] \
            == "SUCCEEDED"
        assert wait_op(client, client.post(f"/api/v1/clusters/{TAG}/switch").json())["status"] == "SUCCEEDED"
        hp = client.post("/api/v1/clusters/hyperpod", json={"acceleratedInstanceType": "ml.g6.4xlarge",
                                                            "acceleratedInstanceCount": 1,
                                                            "availabilityZone": "us-west-2c"}).json()
        assert wait_op(client, hp)["status"] == "SUCCEEDED"
        client.get("/api/v1/clusters/status")
        calls = Calls()
        time.sleep(3 * CACHE_SECONDS)
        calls.take()
        reads = asyncio.run(pollers(url, token, seconds))
        report("idle", calls.take(), reads, seconds, 3 * CACHE_SECONDS)
        scale = client.post("/api/v1/capacity/instance-groups/scale",
                            json={"name": f"accelerated-{TAG}", "targetCount": 2})
        if scale.status_code == 202:
            calls.take()
            reads = asyncio.run(pollers(url, token, seconds))
            counts = calls.take()
            report("while an operation runs (its own polling included)", counts, reads, seconds, CACHE_SECONDS)
        else:
            print(f"P2 (scale not started: {scale.status_code} {scale.text[:200]})")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        twin.stop()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
