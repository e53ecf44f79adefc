"""The `ml.*` instance types HyperPod accepts, with the hardware facts the twin and simulator need."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    """Hardware of one `ml.*` type: vCPUs, memory, accelerators, EFA interfaces, SMT."""

    name: str
    vcpus: int
    memory_gib: int
    accelerators: int = 0
    accelerator: str | None = None
    accelerator_kind: str | None = None  # "nvidia" | "neuron"
    accelerator_memory_gib: int = 0
    efa: int = 0
    smt: bool = True

    @property
    def gpus(self) -> int:
        """NVIDIA GPUs (0 for CPU and Trainium types)."""
        return self.accelerators if self.accelerator_kind == "nvidia" else 0

    @property
    def neuron_devices(self) -> int:
        """Trainium devices."""
        return self.accelerators if self.accelerator_kind == "neuron" else 0

    @property
    def efa_only_capable(self) -> bool:
        """Whether an `efa-only` network interface makes sense (multi-card EFA types)."""
        return self.efa >= 8 or self.name in ("ml.trn2.48xlarge",)

    @property
    def ec2_name(self) -> str:
        """The EC2 name without the `ml.` prefix."""
        return self.name.removeprefix("ml.")


_SIZE_VCPUS = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "9xlarge": 36,
    "12xlarge": 48,
    "16xlarge": 64,
    "18xlarge": 72,
    "24xlarge": 96,
    "32xlarge": 128,
    "48xlarge": 192,
}

_TYPES: dict[str, InstanceType] = {}


def _add(t: InstanceType) -> None:
    _TYPES[t.name] = t


# GPU types (FACTS §3; per-size rows from the HyperPod CLI's INSTANCE_RESOURCES table).
_GPU_ROWS: list[tuple[str, str, list[tuple[str, int, int, int, int]], int]] = [
    # family, model, [(size, vcpu, mem, gpus, efa)], mem/gpu
    (
        "g5",
        "A10G",
        [
            ("xlarge", 4, 16, 1, 0),
            ("2xlarge", 8, 32, 1, 0),
            ("4xlarge", 16, 64, 1, 0),
            ("8xlarge", 32, 128, 1, 1),
            ("12xlarge", 48, 192, 4, 1),
            ("16xlarge", 64, 256, 1, 1),
            ("24xlarge", 96, 384, 4, 1),
            ("48xlarge", 192, 768, 8, 1),
        ],
        24,
    ),
    (
        "g6",
        "L4",
        [
            ("xlarge", 4, 16, 1, 0),
            ("2xlarge", 8, 32, 1, 0),
            ("4xlarge", 16, 64, 1, 0),
            ("8xlarge", 32, 128, 1, 1),
            ("12xlarge", 48, 192, 4, 1),
            ("16xlarge", 64, 256, 1, 1),
            ("24xlarge", 96, 384, 4, 1),
            ("48xlarge", 192, 768, 8, 1),
        ],
        24,
    ),
    (
        "g6e",
        "L40S",
        [
            ("xlarge", 4, 32, 1, 0),
            ("2xlarge", 8, 64, 1, 0),
            ("4xlarge", 16, 128, 1, 0),
            ("8xlarge", 32, 256, 1, 1),
            ("12xlarge", 48, 384, 4, 1),
            ("16xlarge", 64, 512, 1, 1),
            ("24xlarge", 96, 768, 4, 2),
            ("48xlarge", 192, 1536, 8, 4),
        ],
        48,
    ),
    (
        "g4dn",
        "T4",
        [
            ("xlarge", 4, 16, 1, 0),
            ("2xlarge", 8, 32, 1, 0),
            ("4xlarge", 16, 64, 1, 0),
            ("8xlarge", 32, 128, 1, 1),
            ("12xlarge", 48, 192, 4, 1),
            ("16xlarge", 64, 256, 1, 1),
        ],
        16,
    ),
    ("p4d", "A100", [("24xlarge", 96, 1152, 8, 4)], 40),
    ("p4de", "A100", [("24xlarge", 96, 1152, 8, 4)], 80),
    ("p5", "H100", [("4xlarge", 16, 256, 1, 1), ("48xlarge", 192, 2048, 8, 32)], 80),
    ("p5e", "H200", [("48xlarge", 192, 2048, 8, 32)], 141),
    ("p5en", "H200", [("48xlarge", 192, 2048, 8, 16)], 141),
    ("p6-b200", "B200", [("48xlarge", 192, 2048, 8, 8)], 180),
    ("p6-b300", "B300", [("48xlarge", 192, 4096, 8, 16)], 269),
]

for _family, _model, _rows, _mem in _GPU_ROWS:
    for _size, _vcpu, _gib, _gpus, _efa in _rows:
        _add(InstanceType(f"ml.{_family}.{_size}", _vcpu, _gib, _gpus, _model, "nvidia", _mem, _efa, smt=True))

_add(InstanceType("ml.trn1.32xlarge", 128, 512, 16, "Trainium", "neuron", 32, 8))
_add(InstanceType("ml.trn1n.32xlarge", 128, 512, 16, "Trainium", "neuron", 32, 16))
_add(InstanceType("ml.trn2.3xlarge", 12, 128, 1, "Trainium2", "neuron", 96, 1))
_add(InstanceType("ml.trn2.48xlarge", 192, 2048, 16, "Trainium2", "neuron", 96, 16))

# CPU families: memory per vCPU, whether SMT exists (Graviton and AMD 7th/8th gen have none), sizes.
_CPU_FAMILIES: list[tuple[str, int, bool, list[str]]] = [
    ("c5", 2, True, ["large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge"]),
    ("c5n", 2, True, ["large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge"]),
    ("m5", 4, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("t3", 4, True, ["medium", "large", "xlarge", "2xlarge"]),
    ("c6i", 2, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("m6i", 4, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("r6i", 8, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("m7i", 4, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("r7i", 8, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("c6a", 2, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("m6a", 4, True, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"]),
    ("c6g", 2, False, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]),
    ("c7g", 2, False, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]),
    ("m6g", 4, False, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]),
    ("m7g", 4, False, ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]),
    ("i3en", 8, True, ["large", "xlarge", "2xlarge", "3xlarge", "6xlarge", "12xlarge", "24xlarge"]),
]
# Sizes added with botocore 1.44.8's ClusterInstanceType enum (EC2's published vCPU/memory per size).
_CPU_FAMILIES += [
    ("c6i", 2, True, ["32xlarge"]),
    ("m6i", 4, True, ["32xlarge"]),
    ("r6i", 8, True, ["32xlarge"]),
    ("m7i", 4, True, ["48xlarge"]),
    ("r7i", 8, True, ["48xlarge"]),
    ("r5d", 8, True, ["16xlarge"]),
    ("c6a", 2, True, ["32xlarge", "48xlarge"]),
    ("m6a", 4, True, ["32xlarge", "48xlarge"]),
    ("c6g", 2, False, ["medium"]),
    ("c7g", 2, False, ["medium"]),
    ("m6g", 4, False, ["medium"]),
    ("m7g", 4, False, ["medium"]),
    ("c8g", 2, False, ["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                       "24xlarge", "48xlarge"]),
    ("m8g", 4, False, ["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                       "24xlarge", "48xlarge"]),
    ("c8a", 2, False, ["16xlarge"]),
    ("m8a", 4, False, ["16xlarge"]),
]
_EXTRA_VCPUS = {"medium": 2, "3xlarge": 12, "6xlarge": 24}

for _family, _mem_per, _smt, _sizes in _CPU_FAMILIES:
    for _size in _sizes:
        _v = _SIZE_VCPUS.get(_size) or _EXTRA_VCPUS[_size]
        if _size == "medium" and not _smt:
            _v = 1  # Graviton medium sizes have one vCPU
        _add(InstanceType(f"ml.{_family}.{_size}", _v, _v * _mem_per, smt=_smt))
# Burstable t3.medium has 2 vCPUs but 4 GiB (t3.large is the 8 GiB one; EC2 and the HyperPod CLI's table).
_add(InstanceType("ml.t3.medium", 2, 4))

# GPU types added with the same enum. gr6 are L4 types with 8 GiB per vCPU; g7e carry RTX PRO 6000
# Blackwell (96 GB); g7 and p6e-gb200 follow the published sizes as far as known (docs/TWIN.md: derived).
for _size, _vcpu, _gib in (("4xlarge", 16, 128), ("8xlarge", 32, 256)):
    _add(InstanceType(f"ml.gr6.{_size}", _vcpu, _gib, 1, "L4", "nvidia", 24, 1 if _size == "8xlarge" else 0))
for _family, _model, _mem in (("g7e", "RTX PRO 6000", 96), ("g7", "RTX PRO 4500", 32)):
    for _size, _vcpu, _gib, _gpus, _efa in (
        ("2xlarge", 8, 64, 1, 0),
        ("4xlarge", 16, 128, 1, 0),
        ("8xlarge", 32, 256, 1, 1),
        ("12xlarge", 48, 512, 2, 1),
        ("24xlarge", 96, 1024, 4, 2),
        ("48xlarge", 192, 2048, 8, 4),
    ):
        _add(InstanceType(f"ml.{_family}.{_size}", _vcpu, _gib, _gpus, _model, "nvidia", _mem, _efa))
_add(InstanceType("ml.p6e-gb200.36xlarge", 144, 960, 4, "B200", "nvidia", 185, 4, smt=False))


def get(name: str) -> InstanceType | None:
    """The `ml.*` type called `name`, or None if HyperPod does not offer it."""
    return _TYPES.get(name)


def all_types() -> list[InstanceType]:
    """Every known type, sorted by name."""
    return [_TYPES[k] for k in sorted(_TYPES)]


# Types a training plan can reserve (ReservedCapacityInstanceType enum, FACTS §1.8).
RESERVABLE = (
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5.4xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.p6-b300.48xlarge",
    "ml.trn1.32xlarge",
    "ml.trn2.48xlarge",
)
