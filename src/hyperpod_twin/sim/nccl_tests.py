"""Simulated hardware checks: what `fi_info -p efa`, `dcgmi diag`, nccl-tests' `all_reduce_perf` and NCCL's
NCCL_DEBUG=INFO network lines print on a twin node, from the node's model and its injected hardware faults.

Faults are set per HyperPod instance through `POST /_twin/nodes/{i-…}/hardware` (`slow`: its network runs at a
third of the speed; `efa: false`: the EFA provider is missing, so NCCL falls back to sockets; `gpu: "fail"`: the
DCGM memory test fails). The output formats follow the real tools (nccl-tests 2.x, DCGM 3.3, libfabric 1.2x)."""

from __future__ import annotations

import threading
import zlib
from typing import Any

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES, PODS
from hyperpod_twin.sim.kobj import Obj

EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
GBPS_PER_EFA = 11.5  # all-reduce bus bandwidth per 100 Gbps EFA device at large messages (GB/s)
SOCKET_GBPS = 1.2  # the TCP fallback over the node's ENA interface
SLOW_FACTOR = 0.3

_lock = threading.Lock()
_faults: dict[str, dict[str, Any]] = {}  # node name (hyperpod-i-…) → {"slow": bool, "efa": bool, "gpu": str}


def set_faults(instance_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Record a node's hardware faults (ValueError names a bad field); returns the node's faults now."""
    allowed = {"slow", "efa", "gpu"}
    unknown = set(body) - allowed
    if unknown:
        raise ValueError(f"unknown hardware fault field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key in ("slow", "efa"):
        if key in body and not isinstance(body[key], bool):
            raise ValueError(f"{key} must be true or false")
    if "gpu" in body and body["gpu"] not in ("ok", "fail"):
        raise ValueError("gpu must be ok or fail")
    with _lock:
        current = _faults.setdefault(f"hyperpod-{instance_id}", {"slow": False, "efa": True, "gpu": "ok"})
        current.update(body)
        return {"instance_id": instance_id, **current}


def faults_of(node_name: str) -> dict[str, Any]:
    """The injected hardware faults of a Kubernetes Node (healthy when none)."""
    with _lock:
        return dict(_faults.get(node_name) or {"slow": False, "efa": True, "gpu": "ok"})


def reset(**_: Any) -> None:
    """Forget every injected hardware fault."""
    with _lock:
        _faults.clear()


def _allocatable(node: Obj | None, resource: str) -> int:
    return int(kobj.quantity(((node or {}).get("status") or {}).get("allocatable", {}).get(resource, "0")))


def efa_works(node: Obj | None) -> bool:
    """Whether a node has EFA devices and a working EFA provider."""
    name = ((node or {}).get("metadata") or {}).get("name", "")
    return _allocatable(node, EFA) > 0 and bool(faults_of(name)["efa"])


def _command(container: Obj) -> str:
    return " ".join([*(container.get("command") or []), *(container.get("args") or [])])


def output(sim: ClusterSim, pod: Obj, container: Obj) -> list[str] | None:
    """The lines a hardware-check container prints, or None when it runs none of the tools."""
    command = _command(container)
    node = sim.get(NODES, "", str(pod.get("spec", {}).get("nodeName") or ""))
    if "fi_info" in command and "-p efa" in command:
        return fi_info(node)
    if "dcgmi diag" in command:
        return dcgm_diag(node)
    if "all_reduce_perf" in command:
        return all_reduce(sim, pod)
    return None


def fi_info(node: Obj | None) -> list[str]:
    """`fi_info -p efa`: an RDM and a DGRAM entry per EFA device, or libfabric's no-data error."""
    if not efa_works(node):
        return ["fi_getinfo: -61 (No data available)"]
    lines: list[str] = []
    for index in range(_allocatable(node, EFA)):
        device = f"rdmap{16 + index * 16}s27"
        for suffix, ep in (("rdm", "FI_EP_RDM"), ("dgrm", "FI_EP_DGRAM")):
            lines += ["provider: efa", "    fabric: efa", f"    domain: {device}-{suffix}", "    version: 122.0",
                      f"    type: {ep}", "    protocol: FI_PROTO_EFA"]
    return lines


def _row(name: str, result: str) -> str:
    return f"| {name:<25} | {result:<46} |"


def dcgm_diag(node: Obj | None) -> list[str]:
    """`dcgmi diag -r 2`: the DCGM 3.3 table; the GPU memory test fails on a node with a GPU fault."""
    name = ((node or {}).get("metadata") or {}).get("name", "")
    gpus = max(_allocatable(node, GPU), 1)
    memory = "Fail - GPU: 0" if faults_of(name)["gpu"] == "fail" else "Pass - All"
    rule = "+---------------------------+------------------------------------------------+"
    lines = ["Successfully ran diagnostic for group.", rule, _row("Diagnostic", "Result"),
             "+===========================+================================================+",
             "|-----  Metadata  ----------+------------------------------------------------|",
             _row("DCGM Version", "3.3.9"), _row("Driver Version Detected", "550.127.08"),
             _row("GPU Device IDs Detected", ",".join(["2330"] * min(gpus, 8))),
             "|-----  Deployment  --------+------------------------------------------------|"]
    lines += [_row(test, "Pass") for test in (
        "Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
        "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom")]
    lines += ["+-----  Integration  -------+------------------------------------------------+",
              _row("PCIe", "Pass - All"),
              "+-----  Hardware  ----------+------------------------------------------------+",
              _row("GPU Memory", memory)]
    if memory.startswith("Fail"):
        lines.append(_row("Warning", "GPU 0 Double-bit ECC errors detected"))
    return [*lines, "+-----  Stress  ------------+------------------------------------------------+", rule]


def _workers(sim: ClusterSim, launcher: Obj) -> list[Obj]:
    labels = launcher["metadata"].get("labels") or {}
    job = labels.get(JOB_NAME_LABEL)
    pods = [p for p in sim.list(PODS, launcher["metadata"]["namespace"])
            if (p["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == job
            and (p["metadata"].get("labels") or {}).get(ROLE_LABEL) == "worker"]
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def network(sim: ClusterSim, node_names: list[str], efa_requested: bool = True) -> tuple[bool, float]:
    """Whether NCCL across these nodes runs over EFA, and the bus bandwidth it reaches (GB/s)."""
    nodes = [sim.get(NODES, "", n) for n in node_names]
    efa = efa_requested and bool(nodes) and all(efa_works(n) for n in nodes)
    peak = min((GBPS_PER_EFA * _allocatable(n, EFA) for n in nodes), default=0.0) if efa else SOCKET_GBPS
    if any(faults_of(n)["slow"] for n in node_names):
        peak *= SLOW_FACTOR
    return efa, peak


def init_lines(host: str, efa: bool) -> list[str]:
    """The NCCL_DEBUG=INFO lines that name the network NCCL chose on one rank."""
    head = f"{host}:21:21 [0] NCCL INFO"
    if efa:
        return [f"{head} NET/OFI Selected Provider is efa (found 1 nics)", f"{head} Using network Libfabric"]
    return [f"{head} NET/Socket : Using [0]eth0:10.1.0.5<0>", f"{head} Using network Socket"]


def all_reduce(sim: ClusterSim, launcher: Obj) -> list[str]:
    """A launcher's `all_reduce_perf -b 8 -e 2G -f 2 -g 1` output over its workers' nodes."""
    workers = _workers(sim, launcher)
    nodes = [str(w.get("spec", {}).get("nodeName") or "") for w in workers]
    efa_asked = all(kobj.pod_requests(w).get(EFA) for w in workers)
    efa, peak = network(sim, nodes, efa_asked)
    gpus = [max(int(kobj.pod_requests(w).get(GPU, 1)), 1) for w in workers]
    ranks = sum(gpus) or 1
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    rank = 0
    for worker, count in zip(workers, gpus, strict=True):
        for device in range(count):
            lines.append(f"#  Rank {rank:>2} Group  0 Pid {21 + device:>6} on {worker['metadata']['name']} device "
                         f"{device:>2} [0x{16 + device:02x}] NVIDIA H100 80GB HBM3")
            rank += 1
    for worker in workers:
        lines += init_lines(worker["metadata"]["name"], efa)
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
              "   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
              "  (GB/s)"]
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0
    total = 0.0
    size, count = 8, 0
    jitter = (zlib.crc32(",".join(nodes).encode()) % 50) / 1000.0
    while size <= 2 ** 31:
        busbw = peak * size / (size + 4 * 2 ** 20) * (1 - jitter)
        algbw = busbw / factor
        time_us = size / (algbw * 1e3) if algbw > 0 else 0.0
        total += 2 * busbw
        lines.append(f"{size:>12}  {size // 4:>12}     float     sum      -1  {time_us:>7.1f}  {algbw:>6.2f}  "
                     f"{busbw:>6.2f}      0  {time_us:>7.1f}  {algbw:>6.2f}  {busbw:>6.2f}      0")
        size, count = size * 2, count + 1
    return [*lines, "# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {total / (2 * count):.5g} ", "#"]


def training_lines(sim: ClusterSim, pod: Obj, container: Obj) -> list[str]:
    """NCCL's network lines of a multi-node training replica (NNODES > 1): EFA when the pod asked for EFA devices
    and its node's EFA works, sockets otherwise (what NCCL_DEBUG=INFO prints at communicator init)."""
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    nnodes = str(env.get("NNODES") or env.get("PET_NNODES") or "1")
    if not nnodes.isdigit() or int(nnodes) < 2:
        return []
    node = str(pod.get("spec", {}).get("nodeName") or "")
    efa, _ = network(sim, [node], bool(kobj.pod_requests(pod).get(EFA)))
    return init_lines(pod["metadata"]["name"], efa)


def install(twin: Any) -> None:
    """Answer `twin.node.hardware` (the control endpoint) and forget the faults on reset."""

    def on_hardware(instance_id: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        try:
            return set_faults(instance_id, body)
        except ValueError as exc:
            return {"error": str(exc)}

    twin.bus.subscribe("twin.node.hardware", on_hardware)
    twin.bus.subscribe("twin.reset", reset)
