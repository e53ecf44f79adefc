"""Benchmark (twin): how many concurrent Kubernetes watches one twin API server holds, and what they cost.

Run: .venv/bin/python bench/bench_twin_watch.py [WATCHERS] [NODES]   (default 300 watchers, 200 nodes)

Starts one twin API server in this process (loopback, TLS, a bearer token accepted without signing), opens
WATCHERS node watches at once (raw HTTP/1.1 streams, as client-go keeps them), creates NODES Nodes, and
prints: how many watchers saw every ADDED event, how long the last event took to reach the last watcher,
the server's thread count and the process CPU spent while the watches idle and while events flow.
Asserts no timing.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from hyperpod_twin.kube.auth import Identity
from hyperpod_twin.kube.server import KubeApiServer, new_cluster_runtime

TOKEN = "bench-token"


def authenticate(authorization: str | None) -> Identity:
    """Every caller with the bench token is a cluster admin."""
    if authorization != f"Bearer {TOKEN}":
        from hyperpod_twin.kube.auth import AuthError

        raise AuthError("wrong token")
    return Identity(username="bench", uid="bench", groups=("system:masters", "system:authenticated"))


def open_watch(host: str, port: int, rv: str) -> ssl.SSLSocket:
    """A node watch from `rv`, its response headers read."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection((host, port), timeout=120)
    sock = context.wrap_socket(raw, server_hostname=host)
    sock.sendall(f"GET /api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=600 HTTP/1.1\r\n"
                 f"Host: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
    return sock


def count_added(sock: ssl.SSLSocket, want: int, seen: list[int], index: int, done: list[float]) -> None:
    """Read the chunked stream until `want` ADDED events arrived (bookmarks ignored)."""
    buffer = b""
    while seen[index] < want:
        data = sock.recv(65536)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.strip()
            if line.startswith(b"{") and json.loads(line).get("type") == "ADDED":
                seen[index] += 1
    done[index] = time.monotonic()


def cpu() -> float:
    """CPU seconds of this process."""
    times = os.times()
    return times.user + times.system


def main(watchers: int, nodes: int) -> None:
    runtime = new_cluster_runtime("bench", "arn:aws:eks:us-west-2:111122223333:cluster/bench")
    server = KubeApiServer(runtime, authenticate)
    server.start()
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    rv = str(runtime.store.resource_version)
    threads_before = threading.active_count()
    started = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        socks = list(pool.map(lambda _: open_watch(host, port, rv), range(watchers)))
    opened = time.monotonic() - started
    seen, done = [0] * watchers, [0.0] * watchers
    readers = [threading.Thread(target=count_added, args=(s, nodes, seen, i, done), daemon=True)
               for i, s in enumerate(socks)]
    for r in readers:
        r.start()
    time.sleep(2.0)
    server_threads = threading.active_count() - threads_before - watchers
    idle_before = cpu()
    time.sleep(5.0)
    idle = (cpu() - idle_before) / 5.0
    busy_before = cpu()
    started = time.monotonic()
    for i in range(nodes):
        runtime.store.create(runtime.store.types[("", "nodes")], {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n-{i:05d}"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    for r in readers:
        r.join(timeout=300)
    last = max(done) - started if all(done) else float("nan")
    busy = cpu() - busy_before
    complete = sum(1 for s in seen if s == nodes)
    print(f"twin watch: {watchers} watchers opened in {opened:.2f} s; server threads {server_threads}")
    print(f"   idle: {idle * 100:.1f} % of one core (whole process, readers included)")
    print(f"   {nodes} Nodes created: {complete}/{watchers} watchers saw every ADDED; last one after {last:.2f} s; "
          f"{busy:.2f} CPU s ({busy / max(nodes * watchers, 1) * 1e6:.0f} µs per delivered event)")
    for s in socks:
        s.close()
    server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, int(sys.argv[2]) if len(sys.argv) > 2 else 200)
