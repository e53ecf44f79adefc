"""Benchmark (twin): how long a HyperPod cluster of N nodes takes to come up on the twin, and what it costs.

Run: .venv/bin/python bench/bench_twin_scale.py [NODES] [CLOCK_SCALE] [--daemonsets K] [--py-spy FILE]
     (default 2000 nodes, clock scale 200, no DaemonSet)

Starts a twin in this process (every plugin: the EKS API server and the simulator), builds a network and an
ACTIVE EKS cluster, raises the SageMaker quotas to NODES, creates a HyperPod cluster with one instance group of
NODES ml.g6.4xlarge, and prints the wall time and this process's CPU seconds until (1) every node is Running
in ListClusterNodes and the cluster InService and (2) NODES Kubernetes Nodes are registered on the EKS API
server (with how many are Ready), and (3) with `--daemonsets K`, K DaemonSets created beforehand (as the
add-ons bring: one pod per node each) have K x NODES pods Running, beside the simulated waits (converted to
wall seconds by the clock scale). With `--py-spy FILE` py-spy samples
the process meanwhile and writes collapsed stacks to FILE. Asserts no timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hyperpod_twin.aws.hyperpod_timings import CLUSTER_SETUP, NODE_BOOT
from hyperpod_twin.twin import Twin, TwinConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.support
from tests.support.twin_aws import build_eks, build_network, control, group

GROUP = "workers"
ITYPE = "ml.g6.4xlarge"


def cpu() -> float:
    """This process's user + system CPU seconds."""
    times = os.times()
    return times.user + times.system


def counts(twin: Twin, eks: str) -> tuple[int, int, int]:
    """(Nodes, Nodes Ready, pods Running) on the cluster's API server."""
    store: Any = twin.kube_runtimes[eks].store  # type: ignore[attr-defined]
    nodes, _ = store.list(store.find_type("", "nodes"), None, None)
    pods, _ = store.list(store.find_type("", "pods"), None, None)
    ready = sum(1 for n in nodes if any(c.get("type") == "Ready" and c.get("status") == "True"
                                        for c in (n.get("status") or {}).get("conditions") or []))
    return len(nodes), ready, sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")


def daemonset(name: str) -> dict[str, Any]:
    """A DaemonSet with one small pod per node, tolerating every taint (as node agents do)."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "agent", "image": "example/agent:1",
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def main(nodes: int, scale: float, daemonsets: int, spy: str | None) -> None:
    twin = Twin(TwinConfig(port=0, clock_scale=scale)).start()
    try:
        for spec in ({"instance_type": ITYPE, "value": nodes},
                     {"quota_name": "Total number of instances allowed across SageMaker HyperPod clusters",
                      "value": nodes},
                     {"quota_name": "Maximum number of instances allowed per SageMaker HyperPod cluster",
                      "value": nodes}):
            control(twin, "quotas", spec)
        net = build_network(twin, "10.60")
        eks_arn = build_eks(twin, net, "scale-eks")
        sm: Any = twin.boto3_client("sagemaker")
        store: Any = twin.kube_runtimes["scale-eks"].store  # type: ignore[attr-defined]
        for i in range(daemonsets):
            store.create(store.find_type("apps", "daemonsets"), daemonset(f"agent-{i}"))
        sampler = None
        if spy:
            sampler = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(os.getpid()),
                                        "-o", spy, "-f", "raw", "-r", "100", "--threads", "--nonblocking"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started, cpu_before = time.monotonic(), cpu()
        sm.create_cluster(
            ClusterName="scale",
            Orchestrator={"Eks": {"ClusterArn": eks_arn}},
            VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            InstanceGroups=[group(GROUP, ITYPE, nodes)],
            NodeRecovery="Automatic",
        )
        in_service = registered = pods_up = None
        seen = (0, 0, 0)
        next_count = 0.0
        while in_service is None or registered is None or pods_up is None:
            now = time.monotonic() - started
            if in_service is None and sm.describe_cluster(ClusterName="scale")["ClusterStatus"] == "InService":
                in_service = (now, cpu() - cpu_before)
            if now >= next_count:  # a full list of Nodes and pods: not every loop
                seen = counts(twin, "scale-eks")
                next_count = now + 3.0
                if registered is None and seen[0] >= nodes:
                    registered = (now, cpu() - cpu_before, seen[1])
                if pods_up is None and seen[2] >= daemonsets * nodes:
                    pods_up = (now, cpu() - cpu_before)
                print(f"   +{now:6.1f} s  {seen[0]} Nodes ({seen[1]} Ready), {seen[2]} pods Running, "
                      f"CPU {cpu() - cpu_before:.1f} s", flush=True)
            if now > 1800:
                raise SystemExit(f"not up after 30 min: InService {in_service}, (Nodes, Ready, pods) {seen}")
            time.sleep(1.0)
        if sampler is not None:
            sampler.send_signal(2)
            sampler.wait(timeout=120)
        waits = max(CLUSTER_SETUP, NODE_BOOT) / scale
        print(f"Twin scale: HyperPod cluster of {nodes} x {ITYPE} (clock scale {scale:g}; simulated waits "
              f"{waits:.1f} s wall)")
        print(f"   InService, every node Running: wall {in_service[0]:7.1f} s, CPU {in_service[1]:7.1f} s")
        print(f"   {nodes} Kubernetes Nodes registered: wall {registered[0]:7.1f} s, CPU {registered[1]:7.1f} s "
              f"({registered[2]} Ready then)")
        if daemonsets:
            print(f"   {daemonsets * nodes} DaemonSet pods Running: wall {pods_up[0]:7.1f} s, CPU {pods_up[1]:7.1f} s")
        print(f"   load average {os.getloadavg()[0]:.1f} (2 cores shared)")
    finally:
        twin.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    options: dict[str, str | None] = {"--py-spy": None, "--daemonsets": None}
    for flag in options:
        if flag in args:
            at = args.index(flag)
            options[flag] = args[at + 1]
            del args[at:at + 2]
    main(int(args[0]) if args else 2000, float(args[1]) if len(args) > 1 else 200.0,
         int(options["--daemonsets"] or 0), options["--py-spy"])
