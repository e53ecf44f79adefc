"""A pod's hardware: GPUs, Neuron devices, EFA interfaces, cpu and memory rendered as requests/limits, and EFA env."""

from __future__ import annotations

from dataclasses import dataclass

GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"  # what the Neuron device plugin and the HyperPod templates request
EFA = "vpc.amazonaws.com/efa"


@dataclass(frozen=True)
class PodResources:
    """What one pod asks of its node (sized by services from the instance-type catalog)."""

    gpus: int = 0
    neuron: int = 0
    efa: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    efa_rdma: bool = False  # the type's EFA supports RDMA read (FI_EFA_USE_DEVICE_RDMA=1 is safe)

    def requests(self) -> dict[str, str]:
        """requests: accelerators, EFA, cpu and memory (zero-valued entries left out; GPU 0 is never rendered,
        so a Trainium or CPU pod carries no `nvidia.com/gpu` at all)."""
        out = self._devices()
        if self.cpu_milli:
            out["cpu"] = quantity_cpu(self.cpu_milli)
        if self.memory_mib:
            out["memory"] = f"{self.memory_mib}Mi"
        return out

    def limits(self) -> dict[str, str]:
        """limits: devices equal to requests (extended resources must be), memory equal to its request (a pod
        that grows past its share is OOM-killed, never its neighbours); no cpu limit, so ranks are never CFS-
        throttled while a neighbour idles (the HyperPod templates leave it out too)."""
        out = self._devices()
        if self.memory_mib:
            out["memory"] = f"{self.memory_mib}Mi"
        return out

    def render(self) -> dict[str, dict[str, str]]:
        """The container's `resources`."""
        return {"requests": self.requests(), "limits": self.limits()}

    def _devices(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.gpus:
            out[GPU] = str(self.gpus)
        if self.neuron:
            out[NEURON] = str(self.neuron)
        if self.efa:
            out[EFA] = str(self.efa)
        return out


def quantity_cpu(milli: int) -> str:
    """Whole cores as an integer, else millicores."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def efa_env(res: PodResources) -> dict[str, str]:
    """libfabric/NCCL settings the AWS distributed-training samples use when a pod has EFA interfaces: the EFA
    provider (else NCCL falls back to TCP sockets), fork safety, NCCL's bootstrap socket off loopback, and
    device RDMA only where the hardware has RDMA read (on g5/g6 setting it aborts the ranks)."""
    if not res.efa:
        return {}
    env = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "NCCL_SOCKET_IFNAME": "^lo,docker"}
    if res.efa_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env
