"""What sizes a model server: instanceTypes (a preference list), gpuMemory, cpuRequest and memoryRequest."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests.resources import PodResources, quantity_cpu
from instantstart.services.base.status_model import ClusterStatus
from instantstart.services.core import sizing
from instantstart.services.core.instance_types import InstanceType, catalog
from instantstart.services.inference.placement import server_resources

# Kubernetes' quantity syntax (apimachinery resource.Quantity), without a sign: a request is never negative.
QUANTITY = re.compile(r"^(?P<num>[0-9]+(\.[0-9]*)?|\.[0-9]+)(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
QUANTITY_RULE = "a Kubernetes quantity: a number with an optional suffix (m, k, M, G, T, Ki, Mi, Gi, Ti)"
MIN_MEMORY_MIB = 64  # a bare number is bytes in Kubernetes: "16" would ask for 16 bytes


def _refuse(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {field}: {message}", hint=hint,
                        details={"fields": [{"field": field, "message": message}]})


def preference(value: list[str] | str | None) -> list[str] | None:
    """instanceTypes as a list: the original comma-separated string (`"ml.g5.xlarge, ml.g6.xlarge"`) or a list;
    order kept, duplicates and empty items dropped."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    names = list(dict.fromkeys(i.strip() for i in items if i.strip()))
    return names or None


def quantity(value: str, field: str, example: str) -> Decimal:
    """The value of a Kubernetes quantity (`500m`, `4`, `16Gi`, `1e9`); InvalidInput naming the field otherwise."""
    found = QUANTITY.match(value.strip())
    if found is None:
        raise _refuse(field, f"{value[:40]!r} is not {QUANTITY_RULE}", f"Write it like {example}.")
    suffix = found["suffix"] or ""
    try:
        number = Decimal(found["num"])
    except InvalidOperation:
        raise _refuse(field, f"{value[:40]!r} is not {QUANTITY_RULE}", f"Write it like {example}.") from None
    if suffix in _BINARY:
        return number * Decimal(1024 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def cpu_milli(value: str) -> int:
    """cpuRequest in millicores (at least 1m)."""
    milli = math.ceil(quantity(value, "cpuRequest", '"4" or "500m"') * 1000)
    if milli < 1:
        raise _refuse("cpuRequest", f"{value!r} is less than 1m", 'Ask for at least "1m", e.g. "4" or "500m".')
    return milli


def memory_mib(value: str) -> int:
    """memoryRequest in MiB (at least 64Mi: a bare number is bytes, so "16" is refused rather than meaning 16 B)."""
    mib = math.ceil(quantity(value, "memoryRequest", '"16Gi" or "512Mi"') / (1024 ** 2))
    if mib < MIN_MEMORY_MIB:
        raise _refuse("memoryRequest", f"{value!r} is less than {MIN_MEMORY_MIB}Mi (a number without a suffix is "
                      "bytes)", f'Give a unit, e.g. "{value.strip()}Gi" or "512Mi".')
    return mib


def gpu_memory_gib(value: float | str) -> float:
    """gpuMemory in GiB: a number is GiB (`24`), a string a quantity (`"24Gi"`, `"80G"`; `GiB`/`GB` accepted)."""
    if not isinstance(value, str):
        gib = float(value)
    else:
        text = value.strip()
        text = text[:-1] if text.endswith(("iB", "GB", "TB", "MB")) else text
        bare = QUANTITY.match(text)
        if bare is not None and not bare["suffix"]:
            gib = float(Decimal(text))
        else:
            gib = float(quantity(text, "gpuMemory", '24, "24Gi" or "80G"') / (1024 ** 3))
    if gib <= 0:
        raise _refuse("gpuMemory", f"{value!r} is not a positive amount", "Give the memory one GPU needs, e.g. 24.")
    return gib


def _cluster_gpu_types(status: ClusterStatus) -> list[str]:
    return sorted({n.instance_type for n in status.nodes if n.gpus > 0})


def _memory_text(names: list[str]) -> str:
    known = catalog()
    return ", ".join(f"{n} ({known[n].gpu_memory_gib} GiB per GPU)" if n in known and known[n].gpu_memory_gib
                     else n for n in names) or "none"


def _fits(t: InstanceType | None, gib: float | None, gpu_count: int) -> bool:
    return t is not None and t.gpus >= gpu_count and (gib is None or t.gpu_memory_gib >= gib)


def choose_types(status: ClusterStatus, wanted: list[str] | None, gib: float | None,
                 gpu_count: int) -> list[str] | None:
    """The instance type to pin to: the first of `wanted` the cluster has (and whose GPUs hold `gib`), else with only
    `gib` the smallest GPU type of the cluster whose per-GPU memory holds it; None leaves the choice to placement.
    Refused naming the cluster's GPU types (and, for gpuMemory, the types that would fit)."""
    if wanted is None and gib is None:
        return None
    known = catalog()
    present = _cluster_gpu_types(status)
    if gib is not None:
        largest = max(known.values(), key=lambda t: t.gpu_memory_gib)
        if gib > largest.gpu_memory_gib:
            raise _refuse("gpuMemory", f"{gib:g} GiB per GPU, more than any instance type has (the most is "
                          f"{largest.gpu_memory_gib} GiB on {largest.name})",
                          "Lower gpuMemory and spread the model over more GPUs (gpuCount, --tensor-parallel-size).")
    if wanted is not None:
        there = [n for n in wanted if n in present]
        chosen = [n for n in there if _fits(known.get(n), gib, gpu_count)]
        if chosen:
            return chosen[:1]
        why = (f"of instanceTypes, the cluster has {_memory_text(there)}, whose GPUs hold less than {gib:g} GiB"
               if there else f"none of instanceTypes ({', '.join(wanted)}) is in this cluster")
        raise PreconditionFailed(
            f"{why}; the cluster's GPU types: {_memory_text(present)}.",
            hint="Name one of the cluster's GPU types in instanceTypes (the first the cluster has is used), or add "
            "an instance group of the type you want (hyperpod_add_instance_group).",
            details={"instanceTypes": wanted, "clusterTypes": present})
    assert gib is not None
    fitting = sorted((known[n] for n in present if _fits(known.get(n), gib, gpu_count)),
                     key=lambda t: (t.gpu_memory_gib, t.gpus, t.vcpus, t.memory_gib))
    if fitting:
        return [fitting[0].name]
    would = sorted((t for t in known.values() if _fits(t, gib, gpu_count)),
                   key=lambda t: (t.gpu_memory_gib, t.gpus, t.vcpus))
    raise PreconditionFailed(
        f"No GPU type of this cluster has {gpu_count} GPU(s) with {gib:g} GiB each; the cluster's GPU types: "
        f"{_memory_text(present)}.",
        hint=f"Lower gpuMemory, or add an instance group of a type that fits, e.g. "
        f"{_memory_text([t.name for t in would[:4]])} (hyperpod_add_instance_group).",
        details={"gpuMemory": gib, "clusterTypes": present, "fittingTypes": [t.name for t in would]})


def requests(types: list[str], gpu_count: int, cpu: str | None, memory: str | None) -> PodResources:
    """A replica's requests: its GPUs, and cpuRequest/memoryRequest when given (checked against what a node of
    each type gives pods after the kubelet's and system reservations), else its GPUs' share of the smallest type."""
    known = catalog()
    share = server_resources(types, gpu_count)
    milli = cpu_milli(cpu) if cpu is not None else share.cpu_milli
    mib = memory_mib(memory) if memory is not None else share.memory_mib
    for t in (known[n] for n in types if n in known):
        if cpu is not None and milli > sizing.pod_cpu_limit(t) * 1000:
            raise _refuse("cpuRequest", f"{cpu} is more than a {t.name} node gives pods ({sizing.pod_cpu_limit(t)} "
                          f"of its {t.vcpus} vCPUs; the rest is reserved for the kubelet and system daemons)",
                          f'Ask for at most "{quantity_cpu(sizing.pod_cpu_limit(t) * 1000)}", or leave cpuRequest '
                          "out for the replica's share of the node.")
        if memory is not None and mib > sizing.pod_memory_limit_gib(t) * 1024:
            raise _refuse("memoryRequest", f"{memory} is more than a {t.name} node gives pods "
                          f"({sizing.pod_memory_limit_gib(t)}Gi of its {t.memory_gib} GiB)",
                          f'Ask for at most "{sizing.pod_memory_limit_gib(t)}Gi", or leave memoryRequest out.')
    return PodResources(gpus=gpu_count, cpu_milli=milli, memory_mib=mib)
