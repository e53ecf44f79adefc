"""Benchmark P1: `cluster_create` wall time on the twin beside the twin's simulated critical-path waits.

Run: .venv/bin/python bench/bench_create.py [CLOCK_SCALE] [--profile FILE] [--py-spy FILE]   (default 40)

Starts a twin and `instantstart serve` (default settings: 10 s poll interval) as child processes, runs one
`cluster_create` (one ml.g6.4xlarge node) and prints, per stage and in total, the wall time beside the
simulated waits the twin imposes on that stage (EKS CREATING→ACTIVE, add-on CREATING→ACTIVE, HyperPod
Creating→InService and node boot), converted to wall seconds by the clock scale, and the CPU seconds the control
plane and the twin spent meanwhile (the machine is shared: CPU seconds move less than wall time). With
`--profile FILE` the control plane runs under cProfile (its main thread only) and writes its profile to FILE;
with `--py-spy FILE` (py-spy installed beside Python) py-spy samples every thread of the control plane and
of the twin during the run and writes collapsed stacks to FILE and FILE.twin; BENCH_TRACE=1 prints each stage
message as the bench saw it appear (polling every 0.05 s) and, from a thread reading the twin every 0.1 s, when
each simulated wait really ended on the twin beside when the control plane's stage reported it (the poll lag at
the end of that wait). Asserts no timing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from hyperpod_twin.aws.eks_addon_api import ADDON_CREATE
from hyperpod_twin.aws.eks_clusters import CLUSTER_CREATE
from hyperpod_twin.aws.hyperpod_timings import CLUSTER_SETUP, NODE_BOOT
from instantstart.twin_process import start_twin

REPO = Path(__file__).resolve().parents[1]
DEADLINE = 600.0


def seconds(stage: dict[str, Any]) -> float:
    """Wall seconds a stage ran."""
    if not stage.get("startedAt") or not stage.get("finishedAt"):
        return 0.0
    start = datetime.fromisoformat(stage["startedAt"])
    return (datetime.fromisoformat(stage["finishedAt"]) - start).total_seconds()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` and its reaped children (helm, kubectl), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks


class TwinWatcher:
    """Reads the twin every 0.1 s (BENCH_TRACE only): when the EKS cluster, each add-on and the HyperPod cluster
    first reached each status, in seconds since `started`."""

    def __init__(self, endpoint: str, region: str, started: float) -> None:
        import boto3

        self.eks = boto3.client("eks", endpoint_url=endpoint, region_name=region)
        self.sm = boto3.client("sagemaker", endpoint_url=endpoint, region_name=region)
        self.started = started
        self.seen: dict[tuple[str, str], float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _note(self, what: str, status: str) -> None:
        self.seen.setdefault((what, status), time.monotonic() - self.started)

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self._note("eks", self.eks.describe_cluster(name="eks-cluster-p1")["cluster"]["status"])
                for addon in self.eks.list_addons(clusterName="eks-cluster-p1")["addons"]:
                    got = self.eks.describe_addon(clusterName="eks-cluster-p1", addonName=addon)["addon"]
                    self._note(f"addon {addon}", got["status"])
                self._note("hyperpod", self.sm.describe_cluster(ClusterName="hp-cluster-p1")["ClusterStatus"])
            except Exception:  # not created yet
                continue

    def report(self, trace: list[tuple[float, str, str]]) -> None:
        """Each wait's end on the twin beside the first stage message after it."""
        def first_after(at: float, stage: str) -> float | None:
            return next((t for t, name, _ in trace if name == stage and t >= at), None)

        ends = [(what, status, at) for (what, status), at in sorted(self.seen.items(), key=lambda kv: kv[1])
                if status in ("ACTIVE", "DEGRADED", "InService")]
        for what, status, at in ends:
            stage = {"eks": "eks", "hyperpod": "hyperpod"}.get(what, "dependencies")
            saw = first_after(at, stage)
            lag = f"control plane moved on {saw - at:5.2f} s later" if saw is not None else "-"
            print(f"   twin: {what:<40} {status:<9} at +{at:6.2f} s; {lag}")


def main(scale: float, profile: str | None = None, spy: str | None = None) -> None:
    twin = start_twin(clock_scale=scale)
    os.environ.update(twin.env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-create-"))
    with socket.socket() as probe:  # a free port (a fixed pick could be an outgoing connection's ephemeral port)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, **twin.env, "INSTANTSTART_DATA_DIR": str(tmp), "INSTANTSTART_PORT": str(port),
           "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url, "INSTANTSTART_LOG_LEVEL": "WARNING",
           "INSTANTSTART_HELM_REPOSITORY_URL": str(twin.info.get("chart_repo_url") or ""),
           "INSTANTSTART_HELM_PATH": str(REPO / ".tools" / "bin" / "helm"), "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-m", "instantstart.cli.main", "serve"]
    if profile:
        command[1:1] = ["-m", "cProfile", "-o", profile]
    cp = subprocess.Popen(command, env=env, cwd=REPO,
                          stdout=open(tmp / "cp.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {(tmp / 'api-token').read_text().strip()}"}
        client = httpx.Client(base_url=url, headers=headers, timeout=60)
        body = {"clusterTag": "p1", "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
                "availabilityZone": "us-west-2c"}
        trace: list[tuple[float, str, str]] = []  # (seconds since submission, stage, its newest message)
        started = time.monotonic()
        cpu_before = cpu_seconds(cp.pid), cpu_seconds(twin.process.pid)
        samplers = [
            subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-o", out,
                              "-f", "raw", "-r", "200", "--threads", "--nonblocking"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for pid, out in ((cp.pid, spy), (twin.process.pid, f"{spy}.twin")) if spy
        ]
        watcher = TwinWatcher(twin.endpoint_url, twin.env["AWS_REGION"], started) if os.environ.get(
            "BENCH_TRACE") else None
        submitted = time.time()  # the operation's finishedAt is wall-clock time on this machine
        ref = client.post("/api/v1/clusters", json=body)
        assert ref.status_code == 202, ref.text
        trace.append((time.monotonic() - started, "(submission)", "202 Accepted: the preflight passed"))
        while True:
            view = client.get(f"/api/v1/operations/{ref.json()['operationId']}").json()
            for stage in view.get("stages") or []:
                said = (stage["name"], str(stage.get("message") or stage["status"]))
                if stage["status"] != "PENDING" and (not trace or trace[-1][1:] != said) and said not in {
                        t[1:] for t in trace}:
                    trace.append((time.monotonic() - started, *said))
            if view["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            assert time.monotonic() - started < DEADLINE, view
            time.sleep(0.05)
        seen = time.monotonic() - started
        # The create's wall time ends when the operation finished, not when this loop next looked.
        wall = datetime.fromisoformat(view["finishedAt"]).timestamp() - submitted
        if watcher is not None:
            watcher.stop.set()
        cp_cpu = cpu_seconds(cp.pid) - cpu_before[0]
        for sampler in samplers:
            sampler.send_signal(2)
            sampler.wait(timeout=60)
        twin_cpu = cpu_seconds(twin.process.pid) - cpu_before[1]
        assert view["status"] == "SUCCEEDED", view
        import boto3

        eks = boto3.client("eks", endpoint_url=twin.endpoint_url, region_name=twin.env["AWS_REGION"])
        addons = eks.list_addons(clusterName="eks-cluster-p1")["addons"]
        # The critical path: independent add-ons are created together (their waits overlap); the Mountpoint
        # CSI driver waits for the Pod Identity agent it depends on, so the add-on path is two waits long.
        simulated = {"eks": CLUSTER_CREATE, "dependencies": 2 * ADDON_CREATE,
                     "hyperpod": max(CLUSTER_SETUP, NODE_BOOT)}
        print(f"P1 cluster_create on the twin (clock scale {scale:g}, poll interval 10 s):")
        for stage in view["stages"]:
            waits = simulated.get(stage["name"], 0.0) / scale
            ratio = f"{seconds(stage) / waits:.2f}x" if waits else "-"
            print(f"   {stage['name']:<13} wall {seconds(stage):6.2f} s   simulated waits {waits:6.2f} s   {ratio}")
        total = sum(simulated.values()) / scale
        print(f"P1 total: wall {wall:.2f} s / simulated critical-path waits {total:.2f} s = {wall / total:.2f}x "
              f"(submission to the operation's finishedAt; the bench saw it finished +{seen - wall:.2f} s later)")
        if os.environ.get("BENCH_TRACE"):
            for at, stage_name, message in trace:
                print(f"   +{at:6.2f} s  {stage_name:<13} {message[:100]}")
            if watcher is not None:
                watcher.report(trace)
        print(f"P1 CPU during the run: control plane {cp_cpu:.2f} s (with helm/kubectl children), twin "
              f"{twin_cpu:.2f} s; load average {os.getloadavg()[0]:.1f}")
        print(f"P1 {len(addons)} add-ons; stages without simulated waits (activate, storage, verification) are "
              "control-plane and twin work only")
    finally:
        cp.send_signal(2)
        cp.wait(timeout=30)
        twin.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    options: dict[str, str | None] = {"--profile": None, "--py-spy": None}
    for flag in options:
        if flag in args:
            at = args.index(flag)
            options[flag] = args[at + 1]
            del args[at:at + 2]
    main(float(args[0]) if args else 40.0, options["--profile"], options["--py-spy"])
