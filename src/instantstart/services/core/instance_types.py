"""Instance type facts (a data file): accelerators, EFA, ThreadsPerCore; validation with suggestions."""

from __future__ import annotations

import difflib
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from instantstart.errors import InvalidInput

DATA = Path(__file__).resolve().parents[2] / "data" / "instance_types.yaml"


class InstanceType(BaseModel):
    """What the control plane knows about one ml.* instance type."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    gpus: int = 0
    neuron: int = 0
    accelerator: str | None = None
    gpu_memory_gib: int = Field(default=0, alias="gpuMemoryGiB")  # per GPU; 0 for CPU and Trainium types
    vcpus: int
    memory_gib: int = Field(alias="memoryGiB")
    efa: int = 0
    efa_only_eligible: bool = Field(default=False, alias="efaOnlyEligible")
    threads_per_core: int = Field(default=1, alias="threadsPerCore")
    efa_rdma: bool = Field(default=False, alias="efaRdma")

    @property
    def accelerated(self) -> bool:
        """Whether the type has GPUs or Trainium devices."""
        return self.gpus > 0 or self.neuron > 0

    @property
    def accelerators(self) -> int:
        """GPUs or Trainium devices per node (a type has one kind or none)."""
        return self.gpus or self.neuron

    @property
    def accelerator_word(self) -> str:
        """How messages name the type's accelerators."""
        return "Neuron devices" if self.neuron else "GPUs"

    @property
    def ec2_name(self) -> str:
        """The EC2 name (without the ml. prefix), as EC2 offerings and quotas name it."""
        return self.name.removeprefix("ml.")


@cache
def catalog() -> dict[str, InstanceType]:
    """Every known type, by name."""
    raw = yaml.safe_load(DATA.read_text())["types"]
    return {name: InstanceType(name=name, **facts) for name, facts in raw.items()}


def lookup(name: str, field: str = "instanceType") -> InstanceType:
    """The facts of `name`; InvalidInput naming the field (with close matches) when unknown."""
    known = catalog()
    if name in known:
        return known[name]
    guess = difflib.get_close_matches(name if name.startswith("ml.") else f"ml.{name}", list(known), n=3)
    hint = f"Did you mean {', '.join(guess)}?" if guess else "Use cluster_get_available_instances to list them."
    raise InvalidInput(
        f"Invalid input: {field}: unknown HyperPod instance type {name!r}",
        hint=hint,
        details={"fields": [{"field": field, "message": "unknown instance type"}]},
    )
