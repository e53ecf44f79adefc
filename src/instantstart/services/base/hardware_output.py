"""Parsers of hardware-check output (nccl-tests, `dcgmi diag`, `fi_info -p efa`, NCCL_DEBUG=INFO network lines).

Log text is untrusted (workload output): each parser matches only the known line shapes of the real tools and
returns numbers, fixed words and counts; no free text from a log is ever returned."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Transport = Literal["efa", "socket", "unknown"]

# mpirun --tag-output prefixes every line with "[1,0]<stdout>:"; the rest is the tool's own line.
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
# nccl-tests result row: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64)\s+"
    r"(?:sum|prod|max|min|avg|none)\s+-?\d+\s+"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)\s*$"
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+(?:[eE][+-]?\d+)?)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+([a-z0-9]([-a-z0-9.]*[a-z0-9])?)"
                   r"\s+device\s+\d+")
# NCCL_DEBUG=INFO lines that say which network NCCL chose (aws-ofi-nccl on EFA, or the socket fallback).
_OFI = re.compile(r"NCCL INFO (?:NET/OFI Selected Provider is efa|NET/OFI Selected provider is efa|"
                  r"Using network (?:AWS )?Libfabric)")
_SOCKET = re.compile(r"NCCL INFO (?:NET/Socket : Using \[\d+\]|Using network Socket)")
_DCGM_ROW = re.compile(r"^\|\s*([A-Za-z][A-Za-z0-9 /()-]*?)\s*\|\s*(Pass|Fail|Warn|Skip)\b"
                       r"(?:\s*-\s*(All|GPUs?:\s*[\d, ]+))?")
_DCGM_DONE = "Successfully ran diagnostic for group."
_FI_PROVIDER = re.compile(r"^provider:\s*efa\s*$")
_FI_DOMAIN = re.compile(r"^\s*domain:\s*([a-z0-9_]+-(?:rdm|dgrm))\s*$")
_FI_NODATA = re.compile(r"^fi_getinfo:\s*-61\b")


def _lines(text: str) -> list[str]:
    return [_MPI_TAG.sub("", line.rstrip("\r")) for line in text.splitlines()]


@dataclass
class NcclResult:
    """What one all_reduce_perf run measured: the largest message's bus bandwidth and the average, in GB/s."""

    completed: bool
    avg_busbw: float | None = None
    peak_busbw: float | None = None
    largest_bytes: int | None = None
    wrong: int = 0
    ranks: int = 0
    hosts: list[str] = field(default_factory=list)
    transport: Transport = "unknown"


def parse_nccl_tests(text: str) -> NcclResult:
    """Parse nccl-tests (`all_reduce_perf`) output; `completed` only when its summary line was printed."""
    rows: list[tuple[int, float, int]] = []
    avg: float | None = None
    wrong = 0
    hosts: dict[int, str] = {}
    for line in _lines(text):
        row = _ROW.match(line)
        if row:
            size, busbw = int(row.group(1)), max(float(row.group(5)), float(row.group(9)))
            bad = sum(int(g) for g in (row.group(6), row.group(10)) if g.isdigit())
            rows.append((size, busbw, bad))
            continue
        found = _AVG.match(line)
        if found:
            avg = float(found.group(1))
            continue
        oob = _OOB.match(line)
        if oob:
            wrong += int(oob.group(1))
            continue
        rank = _RANK.match(line)
        if rank:
            hosts[int(rank.group(1))] = rank.group(2)
    wrong += sum(bad for _, _, bad in rows)
    largest = max(rows, key=lambda r: r[0]) if rows else None
    return NcclResult(
        completed=avg is not None, avg_busbw=avg, peak_busbw=largest[1] if largest else None,
        largest_bytes=largest[0] if largest else None, wrong=wrong, ranks=len(hosts),
        hosts=sorted(set(hosts.values())), transport=nccl_transport(text),
    )


def nccl_transport(text: str) -> Transport:
    """Which network NCCL chose, from NCCL_DEBUG=INFO lines: EFA (aws-ofi-nccl) wins over a socket line (each rank
    prints its own; one socket rank makes the job run at socket speed, so socket is reported when any says so)."""
    ofi = socket = False
    for line in _lines(text):
        ofi = ofi or bool(_OFI.search(line))
        socket = socket or bool(_SOCKET.search(line))
    if socket:
        return "socket"
    return "efa" if ofi else "unknown"


@dataclass
class DcgmResult:
    """`dcgmi diag` verdict: passed, and the names of the tests that failed or warned (known test names only)."""

    completed: bool
    passed: bool
    failed: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    tests: int = 0


KNOWN_DCGM_TESTS = frozenset({
    "Denylist", "Blacklist", "NVML Library", "CUDA Main Library", "CUDA Toolkit Library", "Permissions and OS Blocks",
    "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap", "Page Retirement", "Graphics Processes",
    "Inforom", "PCIe", "GPU Memory", "Diagnostic", "Memory Bandwidth", "Targeted Stress", "Targeted Power",
    "SM Stress", "Memtest", "Pulse Test", "NVBandwidth", "Software", "EUD",
})


def parse_dcgm_diag(text: str) -> DcgmResult:
    """Parse the table `dcgmi diag -r N` prints; a test outside the known names counts but is not named."""
    completed = False
    failed: list[str] = []
    warned: list[str] = []
    tests = 0
    for line in _lines(text):
        if line.strip() == _DCGM_DONE:
            completed = True
            continue
        row = _DCGM_ROW.match(line)
        if not row:
            continue
        name = row.group(1) if row.group(1) in KNOWN_DCGM_TESTS else "other"
        tests += 1
        if row.group(2) == "Fail":
            failed.append(name)
        elif row.group(2) == "Warn":
            warned.append(name)
    return DcgmResult(completed=completed and tests > 0, passed=completed and tests > 0 and not failed,
                      failed=failed, warned=warned, tests=tests)


@dataclass
class EfaResult:
    """`fi_info -p efa`: whether libfabric found the EFA provider, and on how many RDM domains (devices)."""

    completed: bool
    available: bool
    devices: int = 0


def parse_fi_info(text: str) -> EfaResult:
    """Parse `fi_info -p efa`: provider blocks count their `-rdm` domains; `fi_getinfo: -61` means no EFA."""
    providers = 0
    domains: set[str] = set()
    nodata = False
    for line in _lines(text):
        if _FI_PROVIDER.match(line.strip()):
            providers += 1
            continue
        domain = _FI_DOMAIN.match(line)
        if domain and domain.group(1).endswith("-rdm"):
            domains.add(domain.group(1))
            continue
        if _FI_NODATA.match(line.strip()):
            nodata = True
    available = providers > 0 and not nodata
    return EfaResult(completed=available or nodata, available=available, devices=len(domains) if available else 0)
