"""Hostile input at the HTTP layer: every case is a 4xx with a clear code, and /healthz keeps answering while the
server's event loop never stalls 100 ms (its own loop-lag histogram: the one place a latency bound is the point)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import Running, process_server
from tests.support.waits import until

BIG = 2 * 1024 * 1024  # twice the default limit


POLLER = """
import json, sys, time, threading, httpx
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
times = []
with httpx.Client(base_url=sys.argv[1], timeout=5) as client:
    client.get("/healthz")
    print("ready", flush=True)
    while not stop.is_set():
        started = time.perf_counter()
        status = client.get("/healthz").status_code
        times.append(time.perf_counter() - started if status == 200 else 99.0)
        stop.wait(0.02)
print(json.dumps(times))
"""


@contextmanager
def healthz_poller(url: str) -> Iterator[list[float]]:
    """Poll /healthz from a separate process (so this process's own work cannot delay the poller);
    the list is filled with the response times in seconds when the block ends."""
    times: list[float] = []
    proc = subprocess.Popen(
        [sys.executable, "-c", POLLER, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield times
    finally:
        out, _ = proc.communicate(input="", timeout=30)
        times.extend(json.loads(out))


def code(response: httpx.Response) -> str:
    error: dict[str, Any] = response.json()["error"]
    return f"{response.status_code} {error['code']}"


def reason(response: httpx.Response) -> str:
    error: dict[str, Any] = response.json()["error"]
    return str(error["details"].get("reason"))


def streamed(size: int) -> Iterator[bytes]:
    """A body without Content-Length (chunked), so only the streamed count can stop it."""
    chunk = b"x" * 65536
    for _ in range(size // len(chunk)):
        yield chunk


def test_hostile_requests_get_clear_4xx(database_url: str, tmp_path: Path) -> None:
    with process_server(tmp_path / "data", database_url) as (cp, _), cp.client() as client:
        hostile_requests(cp, client)


def loop_lags(client: httpx.Client, name: str = "instantstart_event_loop_busy_lag_seconds") -> dict[float, float]:
    """A server's event-loop lag histogram from /metrics (by default the part of the lag its loop thread spent
    running code, which other processes on a busy machine do not add to): cumulative count per upper bound (le)."""
    buckets: dict[float, float] = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def test_healthz_stays_fast_under_hostile_requests(tmp_path: Path) -> None:
    # A separate server process and a separate poller process. /healthz must answer every poll, and the server's
    # own event loop must never stall for 100 ms: its 10 ms timer's lateness while its thread ran code is the measure
    # (wall-clock lateness also counts the time the OS ran other processes first: with the whole suite's workers on
    # two cores, a stall by that measure was the machine, not the server; the poller's round
    # trip also counts the time the OS did not schedule the poller, on a shared 2-core machine up to a second;
    # diagnosis of the former xfail: the server-side stalls were botocore's endpoint data loaded by the first
    # Region validation (~0.8 s, now loaded at start in a thread) and full GC passes (gc.freeze at start)).
    with (
        process_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}") as (cp, _),
        cp.client() as client,
    ):
        before = loop_lags(client)
        with healthz_poller(cp.url) as times:
            hostile_requests(cp, client)
            # A fast sequence may end before the poller and the 10 ms loop-lag watch have run long enough to mean
            # anything: keep both running until the watch has 100 samples since the start (about a second).
            until(lambda: loop_lags(client)[float("inf")] - before[float("inf")] >= 100, what="100 loop-lag samples",
                  timeout=30)
        after = loop_lags(client)
    samples = after[float("inf")] - before[float("inf")]
    stalls = samples - (after[0.1] - before[0.1])
    assert samples >= 50, f"the loop-lag watch barely ran: {samples} samples"
    assert stalls == 0, f"{stalls} event-loop stalls over 100 ms during the hostile sequence: {after}"
    assert len(times) >= 10 and all(t < 5 for t in times), f"/healthz times (ms): {[round(t * 1000) for t in times]}"


def hostile_requests(cp: Running, client: httpx.Client) -> None:
    """Every hostile request, each asserted to be a 4xx with a clear code."""
    anon = httpx.Client(base_url=cp.url, timeout=60)
    # Oversized bodies on every route family, declared and streamed.
    for path in ("/api/v1/test/probe", "/api/v1/tools/operation_list", "/mcp", "/sign-in", "/sign-out", "/"):
        for content in (b"{" + b" " * BIG + b"}", streamed(BIG)):
            response = client.post(path, content=content, headers={"Content-Type": "application/json"})
            assert code(response) == "413 PAYLOAD_TOO_LARGE", (path, response.text[:200])
    # The sign-in form has its own small limit, before any token check.
    assert code(anon.post("/sign-in", content=b"token=" + b"a" * 20_000)) == "413 PAYLOAD_TOO_LARGE"
    # Unauthenticated bodies are never read: 401 first.
    assert anon.post("/api/v1/test/probe", content=b"x" * BIG).status_code == 401
    # Deep JSON: both the parser's recursion limit and the depth bound.
    for deep in (b"[" * 100_000, b'{"a":' * 40 + b"1" + b"}" * 40):
        response = client.post("/api/v1/tools/operation_list", content=deep)
        assert code(response) == "422 INVALID_INPUT" and reason(response) == "TOO_DEEP", response.text[:300]
    # Integers beyond 4,300 digits (Python refuses to convert them) and beyond 64 bits.
    for number in (b"1" * 5000, str(1 << 64).encode()):
        response = client.post("/api/v1/tools/operation_list", content=b'{"limit": ' + number + b"}")
        assert code(response) == "422 INVALID_INPUT" and reason(response) == "INTEGER_TOO_LARGE"
    # Offsets past what the database accepts, as a query parameter and in a body.
    response = client.get("/api/v1/operations", params={"offset": str(1 << 63)})
    assert code(response) == "422 INVALID_INPUT"
    assert response.json()["error"]["details"]["fields"][0]["field"] == "offset"
    response = client.post("/api/v1/tools/operation_list", json={"offset": 1 << 63})
    assert code(response) == "422 INVALID_INPUT" and reason(response) == "INTEGER_TOO_LARGE"
    # NUL characters in string filters (PostgreSQL would refuse them with a 500).
    response = client.get("/api/v1/operations", params={"target": "a\x00b"})
    assert code(response) == "422 INVALID_INPUT" and reason(response) == "NUL_CHARACTER"
    assert code(client.post("/api/v1/tools/operation_list", json={"kind": "x\x00"})) == "422 INVALID_INPUT"
    # VPC CIDRs that would make the server enumerate millions of subnets are refused by the model.
    for cidr in ("0.0.0.0/0", "0.0.0.0/3", "10.0.0.0/8", "10.0.0.0/24"):
        response = client.post("/api/v1/clusters/eks", json={"clusterTag": "hostile", "vpcCidr": cidr})
        assert code(response) == "422 INVALID_INPUT", response.text
        assert response.json()["error"]["details"]["fields"][0]["field"] == "vpcCidr"
    with_cidr = {
        "clusterTag": "hostile",
        "region": "us-west-2",
        "vpcCidr": "10.9.0.0/16",
        "publicSubnet1Cidr": "10.9.0.0/24",
        "publicSubnet2Cidr": "10.9.1.0/24",
        "eksPrivateSubnet1Cidr": "10.9.2.0/24",
        "eksPrivateSubnet2Cidr": "10.9.3.0/24",
        "hyperPodPrivateSubnetCidr": "10.9.16.0/22",
    }
    response = client.post("/api/v1/clusters/eks-with-cidr", json=with_cidr)
    assert response.json()["error"]["details"]["fields"][0]["field"] == "hyperPodPrivateSubnetCidr"
    # A huge invalid value is not echoed back whole.
    response = client.post("/api/v1/tools/operation_get", json={"operationId": "op-" + "z" * 900_000})
    assert code(response) == "422 INVALID_INPUT" and len(response.content) < 4096
    # Made-up HTTP methods: answered, and counted under one OTHER label.
    for index in range(50):
        assert client.request(f"X{index}METHOD", "/healthz").status_code in (400, 405)
    metrics = client.get("/metrics").text
    assert "X7METHOD" not in metrics and 'method="OTHER"' in metrics


def test_an_idempotency_key_reused_with_other_arguments_is_refused(server: Running, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal")
    with server.client() as client:
        first = client.post("/api/v1/test/probe", json={"journalDir": journal, "target": "idem", "clientToken": "k1"})
        same = client.post("/api/v1/test/probe", json={"journalDir": journal, "target": "idem", "clientToken": "k1"})
        other = client.post("/api/v1/test/probe", json={"journalDir": journal, "target": "other", "clientToken": "k1"})
        header = client.post(
            "/api/v1/test/probe", json={"journalDir": journal, "target": "other"}, headers={"Idempotency-Key": "k1"}
        )
        fresh = client.post("/api/v1/test/probe", json={"journalDir": journal, "target": "other", "clientToken": "k2"})
    assert first.status_code == 202 and same.json()["operationId"] == first.json()["operationId"]
    assert code(other) == "422 IDEMPOTENCY_KEY_REUSED" and "different arguments" in other.json()["error"]["message"]
    assert code(header) == "422 IDEMPOTENCY_KEY_REUSED"
    assert fresh.status_code == 202 and fresh.json()["operationId"] != first.json()["operationId"]


def test_mcp_refuses_a_foreign_host_header(server: Running) -> None:
    with server.client() as client:
        response = client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Host": "testserver", "Accept": "application/json, text/event-stream"},
        )
    assert 400 <= response.status_code < 500 and response.status_code != 413
